"""The Consul backend and the sync loop against a real Consul agent."""

from __future__ import annotations

import time

import httpx
import pytest

from herder.services import (
    CRITICAL,
    PASSING,
    WARNING,
    CheckRegistration,
    CheckStatus,
    Owner,
    RegistryUnavailable,
    ServiceRegistration,
    ServiceSync,
)
from herder.services.consul import ConsulBackend
from tests.support.consul import ConsulAgent, free_ports
from tests.support.waiting import TIMEOUT, wait_for

ME = Owner("this-herder", "s1")


def service(n: int = 0, *checks: CheckRegistration, port: int = 2001, tags: tuple[str, ...] = ("v1",)
            ) -> ServiceRegistration:
    return ServiceRegistration(id=f"_herder-task-alloc{n}-server-web-http", name="web", address="127.0.0.1",
                               port=port, tags=tags, meta={"owner": "tests"}, checks=checks)


def test_a_service_and_its_checks_reach_the_agent_and_consul_runs_the_tcp_check(consul: ConsulAgent) -> None:
    backend = ConsulBackend({"address": consul.address}, ME)
    tcp = CheckRegistration(id="_herder-check-tcp", name="port open", kind="tcp", target=consul.address,
                            interval=0.5, timeout=1)
    ttl = CheckRegistration(id="_herder-check-ttl", name="script", kind="ttl", ttl=40)
    backend.register(service(0, tcp, ttl))
    registered = consul.services()["_herder-task-alloc0-server-web-http"]
    assert (registered["Service"], registered["Port"], registered["Tags"]) == ("web", 2001, ["v1"])
    assert registered["Meta"]["owner"] == "tests"
    checks = consul.checks()
    assert checks["_herder-check-ttl"]["Type"] == "ttl" and checks["_herder-check-tcp"]["Type"] == "tcp"
    wait_for(lambda: backend.read().checks["_herder-check-tcp"].status == PASSING, what="tcp check passing")
    assert consul.catalog("web")[0]["ServiceID"] == "_herder-task-alloc0-server-web-http"


def test_script_results_are_ttl_updates_with_the_output_as_the_note(consul: ConsulAgent) -> None:
    backend = ConsulBackend({"address": consul.address}, ME)
    backend.register(service(0, CheckRegistration(id="_herder-check-ttl", name="script", kind="ttl", ttl=40)))
    for status in (PASSING, WARNING, CRITICAL):
        backend.update_ttl("_herder-check-ttl", CheckStatus(status, f"said {status}"))
        check = consul.checks()["_herder-check-ttl"]
        assert (check["Status"], check["Output"]) == (status, f"said {status}")


def test_initial_status_is_registered(consul: ConsulAgent) -> None:
    backend = ConsulBackend({"address": consul.address}, ME)
    backend.register(service(0, CheckRegistration(id="_herder-check-ttl", name="s", kind="ttl", ttl=40,
                                                  initial_status=PASSING)))
    assert consul.checks()["_herder-check-ttl"]["Status"] == PASSING


def test_an_edited_check_replaces_the_old_one(consul: ConsulAgent) -> None:
    backend = ConsulBackend({"address": consul.address}, ME)
    sync = ServiceSync(backend)
    old = CheckRegistration(id="_herder-check-old", name="s", kind="ttl", ttl=40)
    sync.set("a/t", [service(0, old)])
    sync.sync_once()
    new = CheckRegistration(id="_herder-check-new", name="s", kind="ttl", ttl=50)
    sync.set("a/t", [service(0, new)])
    sync.sync_once()
    assert {"_herder-check-new"} == {cid for cid in consul.checks() if cid.startswith("_herder-")}


def test_the_sync_removes_stale_herder_services_and_leaves_everyone_elses(consul: ConsulAgent) -> None:
    httpx.put(f"{consul.url}/v1/agent/service/register", json={"ID": "someone-else", "Name": "db"}).raise_for_status()
    ConsulBackend({"address": consul.address}, Owner("another-herder", "s2")).register(service(5))
    backend = ConsulBackend({"address": consul.address}, ME)
    backend.register(service(9))  # left behind by this herder before it died
    sync = ServiceSync(backend)
    sync.set("a/t", [service(1)])
    sync.sync_once()
    assert set(consul.services()) == {"someone-else", "_herder-task-alloc5-server-web-http",
                                      "_herder-task-alloc1-server-web-http"}


def test_a_changed_service_is_updated_and_an_unchanged_one_left_alone(consul: ConsulAgent) -> None:
    backend = ConsulBackend({"address": consul.address}, ME)
    sync = ServiceSync(backend)
    sync.set("a/t", [service(0)])
    sync.sync_once()
    sync.set("a/t", [service(0, port=2002, tags=("v2",))])
    sync.sync_once()
    registered = consul.services()["_herder-task-alloc0-server-web-http"]
    assert (registered["Port"], registered["Tags"]) == (2002, ["v2"])


@pytest.mark.parametrize("count", [10, 500])
def test_an_idle_sync_makes_two_requests_whatever_the_number_of_services(consul: ConsulAgent, count: int) -> None:
    backend = ConsulBackend({"address": consul.address}, ME)
    requests: list[str] = []
    session = backend._client.http.session  # py-consul's requests session: count what goes on the wire
    session.hooks["response"].append(lambda response, *args, **kwargs: requests.append(response.request.url))
    sync = ServiceSync(backend)
    sync.set("a/t", [service(n, port=2000 + n) for n in range(count)])
    sync.sync_once()
    assert len([s for s in consul.services() if s.startswith("_herder-")]) == count
    requests.clear()
    sync.sync_once()
    assert len(requests) == 2, requests


def test_an_unreachable_agent_is_reported_as_unavailable_at_once() -> None:
    (port,) = free_ports(1)
    backend = ConsulBackend({"address": f"127.0.0.1:{port}"}, ME)
    started = time.monotonic()
    with pytest.raises(RegistryUnavailable, match=f"127.0.0.1:{port}"):
        backend.read()
    assert time.monotonic() - started < TIMEOUT  # a hang-stopper: refused connections are not retried


def test_the_loop_retries_until_the_agent_comes_back(own_consul: ConsulAgent) -> None:
    own_consul.stop()
    backend = ConsulBackend({"address": own_consul.address}, ME)
    sync = ServiceSync(backend, min_backoff=0.2, max_backoff=1.0)
    sync.start()
    try:
        sync.set("a/t", [service(0)])
        assert not sync.flush(1), "the agent is down: nothing can be flushed"
        own_consul.start()
        wait_for(lambda: "_herder-task-alloc0-server-web-http" in own_consul.services(), what="re-registered")
    finally:
        sync.close()


def test_a_token_is_sent_with_every_request(consul: ConsulAgent) -> None:
    backend = ConsulBackend({"address": f"http://{consul.address}", "token": "s3cret"}, ME)
    seen: list[str] = []
    backend._client.http.session.hooks["response"].append(
        lambda response, *args, **kwargs: seen.append(response.request.headers.get("X-Consul-Token", "")))
    backend.register(service(0))
    backend.read()
    assert seen and set(seen) == {"s3cret"}
