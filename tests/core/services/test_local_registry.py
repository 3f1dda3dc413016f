"""The embedded registry, its checks and the sync loop over it, against real sockets."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from herder.model import Check
from herder.services import (
    CRITICAL,
    PASSING,
    WARNING,
    CheckRegistration,
    CheckStatus,
    ServiceRegistration,
    ServiceSync,
    check_id,
)
from herder.services.local import LocalRegistry
from herder.services.probes import Prober
from tests.support.consul import free_ports
from tests.support.waiting import TIMEOUT, wait_for


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = {"/ok": 200, "/busy": 429}.get(self.path, 500)
        self.send_response(code)
        self.end_headers()
        self.wfile.write(f"answer {code}".encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_ports(1)[0]), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def prober() -> Iterator[Prober]:
    prober = Prober()
    yield prober
    prober.close()


@pytest.fixture
def registry() -> Iterator[LocalRegistry]:
    backend = LocalRegistry()
    yield backend
    backend.close()


def http_check(target: str, path: str, name: str = "web", interval: float = 0.2) -> CheckRegistration:
    return CheckRegistration(id=f"c-{name}-{path}", name=name, kind="http", target=f"http://{target}{path}",
                             interval=interval, timeout=1)


def wait_status(registry: LocalRegistry, check: str, status: str) -> CheckStatus:
    def found() -> CheckStatus | None:
        now = registry.read().checks.get(check)
        return now if now is not None and now.status == status else None

    return wait_for(found, what=lambda: f"{check} to turn {status}: {registry.read().checks.get(check)}")


# -- check IDs ----------------------------------------------------------------


def test_a_check_id_is_stable_and_changes_with_any_field_of_the_check() -> None:
    check = Check(type="http", name="index", interval=10, timeout=2, path="/")
    assert check_id("svc", check) == check_id("svc", Check(type="http", name="index", interval=10, timeout=2,
                                                            path="/"))
    assert check_id("svc", check) != check_id("svc", Check(type="http", name="index", interval=5, timeout=2,
                                                            path="/"))
    assert check_id("svc", check) != check_id("other", check)
    assert check_id("svc", check).startswith("_herder-check-")


def test_a_service_fingerprint_changes_with_what_is_registered() -> None:
    service = ServiceRegistration(id="_herder-x", name="web", address="127.0.0.1", port=2001, tags=("a",))
    assert service.fingerprint() == ServiceRegistration(id="_herder-x", name="web", address="127.0.0.1", port=2001,
                                                        tags=("a",)).fingerprint()
    assert service.fingerprint() != ServiceRegistration(id="_herder-x", name="web", address="127.0.0.1",
                                                        port=2002, tags=("a",)).fingerprint()


# -- probes, as Consul runs them -------------------------------------------------


def test_an_http_check_passes_on_2xx_warns_on_429_and_is_critical_otherwise(prober: Prober, web: str) -> None:
    assert prober.probe(http_check(web, "/ok")).status == PASSING
    assert prober.probe(http_check(web, "/busy")).status == WARNING
    failed = prober.probe(http_check(web, "/broken"))
    assert failed.status == CRITICAL and "500" in failed.output


def test_a_tcp_check_passes_while_something_listens(prober: Prober, web: str) -> None:
    (closed,) = free_ports(1)
    assert prober.probe(CheckRegistration(id="t", name="t", kind="tcp", target=web, timeout=1)).status == PASSING
    refused = prober.probe(CheckRegistration(id="t", name="t", kind="tcp", target=f"127.0.0.1:{closed}", timeout=1))
    assert refused.status == CRITICAL and "refused" in refused.output.lower()


def test_an_http_check_that_gets_no_answer_in_time_is_critical(prober: Prober) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", free_ports(1)[0]))
        silent.listen()  # accepts, never answers
        port = silent.getsockname()[1]
        started = time.monotonic()
        result = prober.probe(CheckRegistration(id="h", name="h", kind="http", target=f"http://127.0.0.1:{port}/",
                                         timeout=0.3))
    assert result.status == CRITICAL
    assert time.monotonic() - started < TIMEOUT  # the silent server would have held it forever


# -- the embedded registry --------------------------------------------------------


def test_the_local_registry_runs_its_checks_and_forgets_a_deregistered_service(
        registry: LocalRegistry, web: str) -> None:
    service = ServiceRegistration(id="_herder-a", name="web", address="127.0.0.1", port=1,
                                  checks=(http_check(web, "/ok"), http_check(web, "/broken", name="bad")))
    registry.register(service)
    assert registry.read().services["_herder-a"].fingerprint == service.fingerprint()
    wait_status(registry, "c-web-/ok", PASSING)
    wait_status(registry, "c-bad-/broken", CRITICAL)
    registry.deregister("_herder-a")
    registry.deregister("_herder-unknown")  # as Consul: not an error
    assert registry.read().services == {} and registry.read().checks == {}


def test_re_registering_keeps_the_status_of_unchanged_checks_and_drops_removed_ones(
        registry: LocalRegistry, web: str) -> None:
    ok, bad = http_check(web, "/ok", interval=60), http_check(web, "/broken", name="bad", interval=60)
    registry.register(ServiceRegistration(id="_herder-a", name="web", address="h", port=1, checks=(ok, bad)))
    wait_status(registry, ok.id, PASSING)
    registry.register(ServiceRegistration(id="_herder-a", name="web", address="h", port=2, checks=(ok,)))
    checks = registry.read().checks
    assert checks[ok.id].status == PASSING  # not reset to critical: its interval is a minute
    assert bad.id not in checks


def test_a_ttl_check_takes_reports_and_expires_into_critical(registry: LocalRegistry) -> None:
    ttl = CheckRegistration(id="ttl", name="script", kind="ttl", ttl=0.5)
    registry.register(ServiceRegistration(id="_herder-a", name="job", address="h", port=0, checks=(ttl,)))
    assert registry.read().checks["ttl"].status == CRITICAL
    registry.update_ttl("ttl", CheckStatus(PASSING, "fine"))
    assert registry.read().checks["ttl"] == CheckStatus(PASSING, "fine")
    expired = wait_status(registry, "ttl", CRITICAL)
    assert expired.output == "TTL expired (last output before timeout follows): fine"


def test_initial_status_is_the_status_until_the_first_result(registry: LocalRegistry) -> None:
    ttl = CheckRegistration(id="ttl", name="script", kind="ttl", ttl=60, initial_status=WARNING)
    registry.register(ServiceRegistration(id="_herder-a", name="job", address="h", port=0, checks=(ttl,)))
    assert registry.read().checks["ttl"].status == WARNING


def test_the_local_registry_leaves_out_grpc_checks_with_a_warning(
        registry: LocalRegistry, caplog: pytest.LogCaptureFixture) -> None:
    grpc = CheckRegistration(id="g", name="rpc", kind="grpc", target="127.0.0.1:1")
    registry.register(ServiceRegistration(id="_herder-a", name="job", address="h", port=0, checks=(grpc,)))
    assert "g" not in registry.read().checks
    assert "does not run grpc checks" in caplog.text


# -- the sync loop ----------------------------------------------------------------


def test_the_sync_registers_what_is_missing_and_removes_herder_services_nobody_wants(
        registry: LocalRegistry) -> None:
    stale = ServiceRegistration(id="_herder-task-dead-t-web-http", name="web", address="h", port=1)
    registry.register(stale)  # left by a herder that died
    sync = ServiceSync(registry)
    wanted = ServiceRegistration(id="_herder-task-live-t-web-http", name="web", address="h", port=2)
    sync.set("live/t", [wanted])
    sync.sync_once()
    assert set(registry.read().services) == {wanted.id}
    changed = ServiceRegistration(id=wanted.id, name="web", address="h", port=3)
    sync.set("live/t", [changed])
    sync.sync_once()
    assert registry.read().services[wanted.id].fingerprint == changed.fingerprint()
    sync.remove("live/t")
    sync.sync_once()
    assert registry.read().services == {}


class _Counting:
    """The embedded registry, counting the calls the sync makes of it."""

    def __init__(self, backend: LocalRegistry) -> None:
        self.backend = backend
        self.calls: list[str] = []
        self.name = backend.name

    def read(self):  # type: ignore[no-untyped-def]
        self.calls.append("read")
        return self.backend.read()

    def register(self, service: ServiceRegistration) -> None:
        self.calls.append("register")
        self.backend.register(service)

    def deregister(self, service_id: str) -> None:
        self.calls.append("deregister")
        self.backend.deregister(service_id)

    def update_ttl(self, check: str, status: CheckStatus) -> None:
        self.backend.update_ttl(check, status)

    def close(self) -> None:
        self.backend.close()


@pytest.mark.parametrize("count", [10, 500])
def test_an_idle_sync_only_reads_whatever_the_number_of_services(registry: LocalRegistry, count: int) -> None:
    counting = _Counting(registry)
    sync = ServiceSync(counting)
    sync.set("a/t", [ServiceRegistration(id=f"_herder-{n}", name="web", address="h", port=n) for n in range(count)])
    sync.sync_once()
    assert counting.calls.count("register") == count
    counting.calls.clear()
    sync.sync_once()
    assert counting.calls == ["read"]


def test_flush_waits_for_the_loop_to_apply_a_change(registry: LocalRegistry) -> None:
    sync = ServiceSync(registry)
    sync.start()
    try:
        sync.set("a/t", [ServiceRegistration(id="_herder-1", name="web", address="h", port=1)])
        assert sync.flush(5)
        assert set(registry.read().services) == {"_herder-1"}
    finally:
        sync.close()


def test_a_task_without_services_wakes_no_sync(registry: LocalRegistry) -> None:
    # Every task's start sets its services; most have none, and a pass of the loop each is wasted work.
    sync = ServiceSync(registry)
    sync.set("a/t", [])
    assert sync._generation == 0  # nothing changed, so the loop has nothing to match
    sync.set("b/t", [ServiceRegistration(id="_herder-1", name="web", address="h", port=1)])
    sync.set("b/t", [])  # a task that had services and now has none is a change
    assert sync._generation == 2
    assert sync.desired() == {}
