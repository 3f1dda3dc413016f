"""An API client cannot grow the agent's metrics: requests are labelled by route template and method.

Were a request labelled by its path or its method as sent, a client making
requests to ever new paths (an allocation ID, a job name, any path at all)
or with made-up methods would add series without end: memory of the agent,
and of every Prometheus scraping it, until they fall over.
"""

from __future__ import annotations

import uuid

from prometheus_client.parser import text_string_to_metric_families

from tests.support.agent import AgentProcess

Series = set[tuple[str, tuple[tuple[str, str], ...]]]


def request_series(agent: AgentProcess) -> Series:
    """Every series of the API's request metrics: its name and labels."""
    with agent.http() as http:
        text = http.get("/v1/metrics", params={"format": "prometheus"}).text
    return {(sample.name, tuple(sorted(sample.labels.items())))
            for family in text_string_to_metric_families(text) if family.name.startswith("herder_api_")
            for sample in family.samples}


UNROUTED = ("PROPFIND", "PURGE", "MKCOL", "LOCK", "REPORT")
"""Methods of HTTP's registry (so the parser takes them) that no route of the agent has."""


def test_requests_to_made_up_paths_and_methods_add_no_series(shared_agent: AgentProcess) -> None:
    def attack(rounds: int) -> None:
        with shared_agent.http() as http:
            for index in range(rounds):
                made_up = uuid.uuid4().hex
                assert http.get(f"/v1/{made_up}").status_code == 404
                assert http.get(f"/v1/allocations/{made_up}").status_code == 404
                assert http.get(f"/v1/jobs/{made_up}/{made_up}").status_code == 404
                # A made-up method is not HTTP to the parser (400, the app never sees it); one it knows
                # that no route takes reaches the app, and is labelled as any other such.
                assert http.request(f"X{index}{made_up[:8]}".upper(), "/v1/health").status_code == 400
                assert http.request(UNROUTED[index % len(UNROUTED)], "/v1/health").status_code == 405

    attack(1)  # the series these requests have, once
    request_series(shared_agent)  # and the scrape's own
    before = request_series(shared_agent)
    attack(50)
    after = request_series(shared_agent)
    assert after == before, sorted(after - before)[:5]
