"""``GET /v1/metrics``: Prometheus' text and the same as JSON, and a real Prometheus scraping the agent."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from herder.agent.metrics import Metrics
from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.consul import free_ports
from tests.support.require import require
from tests.support.waiting import wait_for

TOKEN = "metrics-token"

Samples = dict[str, list[Sample]]


def scrape(agent: AgentProcess) -> Samples:
    """The agent's metrics in Prometheus' text format, parsed: every sample by its name."""
    with agent.http() as http:
        response = http.get("/v1/metrics", params={"format": "prometheus"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    found: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def value(samples: Samples, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` whose labels include ``labels``; None if there is none."""
    matching = [s.value for s in samples.get(name, []) if labels.items() <= s.labels.items()]
    assert len(matching) <= 1, (name, labels, matching)
    return matching[0] if matching else None


@pytest.fixture(scope="module")
def running(shared_agent: AgentProcess) -> Iterator[str]:
    """The allocation of a running raw_exec job ``watched``; stopped after."""
    alloc_id = str(shared_agent.submit(ticker("watched"))["allocations"][0]["id"])
    shared_agent.wait_task(alloc_id, "t")
    yield alloc_id
    with shared_agent.http() as http:
        http.delete("/v1/jobs/watched")
    shared_agent.wait_task(alloc_id, "t", "dead")


def test_a_running_task_shows_its_usage_with_its_labels(shared_agent: AgentProcess, running: str) -> None:
    labels = {"job": "watched", "group": "g", "alloc": running, "task": "t", "driver": "raw_exec"}

    def measured() -> Samples | None:
        found = scrape(shared_agent)
        return found if value(found, "herder_task_memory_rss_bytes", **labels) else None

    found = wait_for(measured, what="the task's memory among the metrics")
    rss = value(found, "herder_task_memory_rss_bytes", **labels)
    assert rss is not None and rss > 100_000  # a shell is more than 100 kB
    assert value(found, "herder_task_cpu_seconds_total", **labels) is not None
    assert value(found, "herder_task_processes", **labels) == 1  # the shell exec'd sleep
    assert value(found, "herder_task_restarts_total", **labels) == 0
    running_allocs = value(found, "herder_allocations", state="running")
    assert running_allocs is not None and running_allocs >= 1
    assert value(found, "herder_driver_healthy", driver="raw_exec") == 1
    assert value(found, "herder_driver_detected", driver="raw_exec") == 1
    started = value(found, "herder_task_events_total", type="Started")
    assert started is not None and started >= 1
    supervised = value(found, "herder_supervisor_processes", state="running")
    assert supervised is not None and supervised >= 1
    logged = value(found, "herder_supervisor_logged_bytes_total")
    assert logged is not None and logged >= len("started\noops\n")
    committed = value(found, "herder_state_transactions_total", outcome="committed")
    assert committed is not None and committed > 0
    assert value(found, "herder_state_transaction_seconds_count") is not None


def test_a_restart_counts(shared_agent: AgentProcess, running: str) -> None:
    labels = {"alloc": running, "task": "t"}
    before = value(scrape(shared_agent), "herder_task_restarts_total", **labels)
    assert before is not None
    with shared_agent.http() as http:
        assert http.post(f"/v1/allocations/{running}/restart", json={"task": "t"}).status_code == 200
    wait_for(lambda: value(scrape(shared_agent), "herder_task_restarts_total", **labels) == before + 1,
             what="the restart counted")
    shared_agent.wait_task(running, "t")
    restarts = value(scrape(shared_agent), "herder_task_events_total", type="Restart Signal")
    assert restarts is not None and restarts >= 1


def test_requests_are_timed_by_route_template_not_path(shared_agent: AgentProcess, running: str) -> None:
    junk = [f"/v1/{uuid.uuid4().hex}" for _ in range(3)]
    with shared_agent.http() as http:
        assert http.get(f"/v1/allocations/{running}").status_code == 200
        assert http.get("/v1/allocations/no-such-alloc").status_code == 404
        for path in junk:
            assert http.get(path).status_code == 404
        assert http.request("PROPFIND", "/v1/health").status_code == 405  # a method no route has
    found = scrape(shared_agent)
    route = "/v1/allocations/{alloc_id}"
    count = value(found, "herder_api_request_duration_seconds_count", method="GET", route=route)
    assert count is not None and count >= 2
    assert value(found, "herder_api_request_duration_seconds_bucket", method="GET", route=route, le="+Inf") == count
    assert value(found, "herder_api_requests_total", method="GET", route=route, status="404") is not None
    unmatched = value(found, "herder_api_requests_total", method="GET", route="unmatched", status="404")
    assert unmatched is not None and unmatched >= len(junk)
    assert value(found, "herder_api_requests_total", method="OTHER", route="/v1/health", status="405") == 1
    # (That no request adds a series of its own: tests/security/test_metrics_labels.py.)


def test_json_and_text_say_the_same(shared_agent: AgentProcess, running: str) -> None:
    with shared_agent.http() as http:
        text = http.get("/v1/metrics", params={"format": "prometheus"}).text
        document: dict[str, Any] = http.get("/v1/metrics").json()
    Metrics.model_validate(document)  # the shape the OpenAPI document gives
    # What the two requests themselves changed (the request counts, the agent's process) aside.
    moving = ("herder_api_", "herder_process_", "herder_task_cpu_", "herder_state_", "herder_task_memory_")
    parsed = {family.name: family for family in text_string_to_metric_families(text)
              if not family.name.startswith(moving)}
    families = {family["name"]: family for family in document["families"] if not family["name"].startswith(moving)}
    assert families.keys() == parsed.keys()
    assert {"herder_allocations", "herder_tasks", "herder_task_restarts", "herder_driver_healthy"} <= families.keys()
    for name, family in families.items():
        assert family["type"] == parsed[name].type and family["help"] == parsed[name].documentation
        assert [(s["name"], s["labels"], s["value"]) for s in family["samples"]] == \
            [(s.name, s.labels, s.value) for s in parsed[name].samples], name


def prometheus_config(agent: AgentProcess) -> str:
    """A scrape of ``agent`` every second, with its token: as docs/observability.md shows it."""
    return f"""
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: herder
    metrics_path: /v1/metrics
    params:
      format: [prometheus]
    authorization:
      type: Bearer
      credentials: {agent.token}
    static_configs:
      - targets: ["127.0.0.1:{agent.port}"]
"""


@pytest.mark.slow
def test_a_real_prometheus_scrapes_the_agent(tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    require("prometheus", binary is not None, "the prometheus binary is not installed (Debian: apt install prometheus)")
    assert binary is not None
    (tmp_path / "agent").mkdir()
    agent = AgentProcess(tmp_path / "agent", token=TOKEN).start()
    prometheus: subprocess.Popen[bytes] | None = None
    try:
        alloc_id = agent.submit(ticker("scraped"))["allocations"][0]["id"]
        agent.wait_task(alloc_id, "t")
        config = tmp_path / "prometheus.yml"
        config.write_text(prometheus_config(agent))
        port = free_ports(1)[0]
        with (tmp_path / "prometheus.log").open("wb") as log:
            prometheus = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
        api = f"http://127.0.0.1:{port}/api/v1"

        def target() -> dict[str, Any] | None:
            assert prometheus is not None and prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                response = httpx.get(f"{api}/targets", timeout=5.0)
            except httpx.HTTPError:
                return None  # not listening yet
            if response.status_code == httpx.codes.SERVICE_UNAVAILABLE:
                return None  # listening, but still opening its database
            active = response.json()["data"]["activeTargets"]
            return active[0] if active and active[0]["health"] == "up" else None

        up = wait_for(target, 60, lambda: f"the agent's target to be up: {(tmp_path / 'prometheus.log').read_text()}")
        assert up["labels"]["job"] == "herder" and up["lastError"] == ""

        def queried() -> list[dict[str, Any]]:
            # The task's own label "job" becomes "exported_job": "job" is the scrape's.
            query = f'herder_task_memory_rss_bytes{{exported_job="scraped", alloc="{alloc_id}"}}'
            response = httpx.get(f"{api}/query", params={"query": query}, timeout=5.0).json()
            assert response["status"] == "success", response
            return list(response["data"]["result"])

        result = wait_for(queried, what="the task's memory in Prometheus")
        assert result[0]["metric"]["task"] == "t" and result[0]["metric"]["driver"] == "raw_exec"
        assert float(result[0]["value"][1]) > 100_000
    finally:
        if prometheus is not None:
            prometheus.terminate()
            try:
                prometheus.wait(30)
            except subprocess.TimeoutExpired:
                prometheus.kill()
                prometheus.wait()
        agent.shutdown()
