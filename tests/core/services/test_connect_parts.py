"""The parts of Connect around a sidecar: upstream variables, the socket to Consul, the sidecar's
registration in a real Consul."""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from herder.client.env import set_upstream_vars
from herder.client.hooks.sidecars import sidecar_registration
from herder.client.unix_relay import UnixRelay
from herder.context import AllocatedPort
from herder.jobspec import load_job, load_job_text
from herder.objects import AllocNetwork
from herder.sdk.safefs import UnsafePathError
from herder.services import Owner, ServiceRegistration
from herder.services.consul import ConsulBackend
from tests.support.consul import ConsulAgent, free_ports
from tests.support.running import make_config, start_job
from tests.support.waiting import wait_for

# A real Consul and a relay between processes: the same on every Python.
pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "countdash.nomad"


def test_every_task_of_a_group_sees_its_upstreams_as_nomad_names_them() -> None:
    dashboard = load_job(EXAMPLE).groups[1]
    env: dict[str, str] = {}
    set_upstream_vars(env, dashboard)
    for prefix in ("NOMAD_", "HERDER_"):
        for name in ("count-api", "count_api"):
            assert env[f"{prefix}UPSTREAM_ADDR_{name}"] == "127.0.0.1:8080"
            assert env[f"{prefix}UPSTREAM_IP_{name}"] == "127.0.0.1"
            assert env[f"{prefix}UPSTREAM_PORT_{name}"] == "8080"
    assert len(env) == 12


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    """A TCP server on loopback that sends back what it reads."""
    server = socket.create_server(("127.0.0.1", free_ports(1)[0]))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                while data := conn.recv(4096):
                    conn.sendall(data)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()
    server.close()
    thread.join(5)


def _ask(path: Path, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(str(path))
        client.sendall(data)
        client.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := client.recv(4096):
            received += chunk
        return received


def test_the_relay_reaches_the_target_and_leaves_nothing(tmp_path: Path, echo: tuple[str, int]) -> None:
    relay = UnixRelay(tmp_path, "consul_http.sock", echo)
    try:
        assert [_ask(tmp_path / "consul_http.sock", f"hello {n}".encode()) for n in range(3)] == \
            [b"hello 0", b"hello 1", b"hello 2"]
    finally:
        relay.close()
    assert list(tmp_path.iterdir()) == []


def test_the_relay_replaces_what_a_task_planted_and_follows_no_link(tmp_path: Path, echo: tuple[str, int]) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "consul_http.sock").symlink_to(victim)
    relay = UnixRelay(tmp, "consul_http.sock", echo)
    try:
        assert _ask(tmp / "consul_http.sock", b"ping") == b"ping"
    finally:
        relay.close()
    assert victim.read_text() == "keep"
    # A directory swapped for a link is refused, not followed.
    os.rename(tmp, tmp_path / "elsewhere")
    tmp.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError):
        UnixRelay(tmp, "consul_http.sock", echo)
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_sidecar_is_registered_as_a_connect_proxy_of_its_service(consul: ConsulAgent) -> None:
    api = load_job(EXAMPLE).groups[1]
    [service] = api.services
    parent = ServiceRegistration(id="_herder-group-a1-dashboard-count-dashboard-http", name="count-dashboard",
                                 address="127.0.0.1", port=9002)
    ports = [AllocatedPort("http", 9002, 9002), AllocatedPort("connect-proxy-count-dashboard", 23456)]
    network = AllocNetwork(mode="bridge", path=Path("/var/run/netns/x"), ip="172.26.64.7")
    sidecar = sidecar_registration(service, parent, ports, network)
    assert sidecar is not None
    backend = ConsulBackend({"address": consul.address}, Owner("scope", "session"))
    try:
        backend.register(parent)
        backend.register(sidecar)
        registered = httpx.get(f"{consul.url}/v1/agent/service/{sidecar.id}", timeout=5).json()
        assert registered["ID"] == "_herder-group-a1-dashboard-count-dashboard-http-sidecar-proxy"
        assert (registered["Kind"], registered["Service"]) == ("connect-proxy", "count-dashboard-sidecar-proxy")
        # Advertised where the proxy listens: the allocation's address, the same port inside and out.
        assert (registered["Address"], registered["Port"]) == ("172.26.64.7", 23456)
        proxy = registered["Proxy"]
        assert (proxy["DestinationServiceName"], proxy["DestinationServiceID"]) == ("count-dashboard", parent.id)
        assert (proxy["LocalServiceAddress"], proxy["LocalServicePort"]) == ("127.0.0.1", 9002)
        assert [(up["DestinationName"], up["LocalBindPort"]) for up in proxy["Upstreams"]] == [("count-api", 8080)]
        assert proxy["Config"] == {"bind_address": "0.0.0.0", "bind_port": 23456}
        checks = httpx.get(f"{consul.url}/v1/agent/checks", timeout=5).json()
        assert [check["Name"] for check in checks.values() if check["ServiceID"] == sidecar.id] == \
            ["Connect Sidecar Listening"]
        # An unchanged sidecar needs no update; the view sees it as registered.
        assert backend.read().services[sidecar.id].fingerprint == sidecar.fingerprint()
    finally:
        backend.deregister(sidecar.id)
        backend.deregister(parent.id)
        backend.close()


EXPOSED = """
job "demo" {
  group "api" {
    network {
      mode = "bridge"
      port "http" { to = 9001 }
    }
    service {
      name = "api"
      port = "http"
      check {
        type     = "http"
        path     = "/health"
        interval = "10s"
        timeout  = "2s"
        expose   = true
      }
      connect {
        sidecar_service {
          disable_default_tcp_check = true
          proxy {
            config { protocol = "http" }
          }
        }
      }
    }
    task "web" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"""


def test_an_exposed_check_is_a_path_of_the_sidecars_registration(consul: ConsulAgent) -> None:
    [service] = load_job_text(EXPOSED, "hcl", "job.hcl").groups[0].services
    parent = ServiceRegistration(id="_herder-group-a2-api-api-http", name="api", address="127.0.0.1", port=25000)
    ports = [AllocatedPort("http", 25000, 9001), AllocatedPort("connect-proxy-api", 25001),
             AllocatedPort("svc_api_ck_0", 25002)]
    sidecar = sidecar_registration(service, parent, ports, None)
    assert sidecar is not None and sidecar.checks == ()
    backend = ConsulBackend({"address": consul.address}, Owner("scope", "session"))
    try:
        backend.register(parent)
        backend.register(sidecar)
        proxy = httpx.get(f"{consul.url}/v1/agent/service/{sidecar.id}", timeout=5).json()["Proxy"]
        # The check's path, served in the clear on its own port by the proxy, from the service's port inside.
        assert proxy["Expose"]["Paths"] == [{"ListenerPort": 25002, "Path": "/health", "LocalPathPort": 9001,
                                             "Protocol": "http", "ParsedFromCheck": False}]
        assert proxy["Config"] == {"bind_address": "0.0.0.0", "protocol": "http", "bind_port": 25001}
        # Without a namespace it is advertised where its port is on the host.
        assert httpx.get(f"{consul.url}/v1/agent/service/{sidecar.id}", timeout=5).json()["Address"] == "127.0.0.1"
    finally:
        backend.deregister(sidecar.id)
        backend.deregister(parent.id)
        backend.close()


NATIVE = """
job "native" {
  group "app" {
    network {
      port "http" {}
    }
    service {
      name = "native-api"
      port = "http"
      connect { native = true }
    }
    task "server" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        args    = ["-c", "exec sleep 3600"]
      }
    }
  }
}
"""


def test_a_native_service_is_registered_as_one_and_starts_no_proxy(data_dir: Path, consul: ConsulAgent) -> None:
    config = dataclasses.replace(make_config(data_dir), services_backend="consul", consul={"address": consul.address})
    run, wait = start_job(NATIVE, data_dir, config=config)
    try:
        run.wait_for("Started", "server")
        alloc = run.runner.allocs[0]
        service_id = f"_herder-group-{alloc.alloc.id}-app-native-api-http"
        registered = wait_for(lambda: consul.services().get(service_id), what=f"{service_id} registered")
        assert registered["Connect"] == {"Native": True}
        assert [task.name for task in alloc.tasks] == ["server"]
    finally:
        run.runner.stop()
        assert wait() == "stopped"
    assert consul.services() == {}
