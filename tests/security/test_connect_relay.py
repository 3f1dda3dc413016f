"""Attacks of a task on the socket in ``alloc/tmp`` that relays to Consul: a client that asks for a
large answer and never reads it must stall neither the allocation's other connections (its sidecar
renewing certificates) nor the relay's stop, which would leave a thread and its connections behind in
the agent after the allocation ended; the allocations of one job holding all the connections their
sockets take must not lock the agent and every other job out of Consul. A job's sidecar registration
that Consul refuses must not hold up every other job's services either."""

from __future__ import annotations

import contextlib
import fcntl
import socket
import struct
import termios
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from herder.client.hooks.connect import GRPC_SOCKET, HTTP_SOCKET, ConnectPlugin
from herder.client.unix_relay import CHUNK, UnixRelay
from herder.errors import JobError
from herder.jobspec import load_job_text
from herder.services import ExposedPath, Owner, ProxyRegistration, ServiceRegistration, ServiceSync
from herder.services.consul import ConsulBackend
from tests.support.consul import ConsulAgent, free_ports
from tests.support.waiting import TIMEOUT, wait_for

ANSWER = 64 * CHUNK
"""What the target sends for ``big``: far more than the sockets' buffers on the way hold."""


@pytest.fixture
def target() -> Iterator[tuple[str, int]]:
    """A TCP server on loopback: it answers ``big`` with :data:`ANSWER` bytes and echoes anything else."""
    server = socket.create_server(("127.0.0.1", free_ports(1)[0]))
    connections: list[socket.socket] = []

    def answer(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            request = conn.recv(64)
            conn.sendall(b"x" * ANSWER if request == b"big" else request)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            connections.append(conn)
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()
    finally:
        server.shutdown(socket.SHUT_RDWR)
        server.close()
        thread.join(TIMEOUT)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()


def _connect(path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(TIMEOUT)
    client.connect(str(path))
    return client


def test_a_client_that_never_reads_stalls_neither_the_others_nor_the_stop(
        tmp_path: Path, target: tuple[str, int]) -> None:
    relay = UnixRelay(tmp_path, "consul_http.sock", target)
    stuck = _connect(relay.path)
    try:
        stuck.sendall(b"big")
        # The answer is on its way: the stuck client's socket holds a good part of what it can.
        wait_for(lambda: _queued(stuck) >= CHUNK or None, what="the answer queued for the stuck client")
        with _connect(relay.path) as other:
            other.sendall(b"ping")
            assert other.recv(16) == b"ping"
    finally:
        relay.close()
        stuck.close()
    assert not relay._thread.is_alive()
    assert list(tmp_path.iterdir()) == []


def _queued(client: socket.socket) -> int:
    """The bytes waiting in ``client``'s socket to be read."""
    return struct.unpack("i", fcntl.ioctl(client, termios.FIONREAD, b"\0\0\0\0"))[0]


ALLOCATIONS = 4
HELD = 64
"""Connections a task of each allocation opens to its socket and keeps."""
REQUEST = b"GET /v1/status/leader HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def test_the_allocations_of_a_job_do_not_lock_the_agent_out_of_consul(
        tmp_path: Path, own_consul: ConsulAgent) -> None:
    consul = SimpleNamespace(address=own_consul.address, grpc_address=f"127.0.0.1:{own_consul.ports['grpc']}")
    plugin = ConnectPlugin(SimpleNamespace(config=SimpleNamespace(consul=vars(consul))), None)  # type: ignore[arg-type]
    held: list[socket.socket] = []
    try:
        for index in range(ALLOCATIONS):
            alloc_dir = tmp_path / f"alloc{index}"
            (alloc_dir / "alloc" / "tmp").mkdir(parents=True)
            plugin._ensure_relays(f"alloc{index}", alloc_dir)
            for _ in range(HELD):
                client = _connect(alloc_dir / "alloc" / "tmp" / HTTP_SOCKET)
                held.append(client)
                # Consul's answer, or the relay's refusal: the connection is settled either way.
                with contextlib.suppress(ConnectionError):
                    client.sendall(REQUEST)
                    client.recv(16)
        # The agent's own requests (registrations, other jobs' services) still reach Consul.
        assert httpx.get(f"{own_consul.url}/v1/agent/services", timeout=TIMEOUT).status_code == 200
    finally:
        for client in held:
            client.close()
        plugin.close()


REFUSED = [
    # Two paths on one listener: Consul answers 400 to the registration, whatever herder tries again.
    ServiceRegistration(
        id="_herder-group-a1-api-api-http-sidecar-proxy", name="api-sidecar-proxy", address="127.0.0.1", port=2345,
        proxy=ProxyRegistration(destination_name="api", destination_id="_herder-group-a1-api-api-http",
                                local_service_address="127.0.0.1", local_service_port=9001,
                                expose=(ExposedPath("/a", "http", 9001, 3000), ExposedPath("/b", "http", 9001, 3000)))),
    # A job's service meta with a key Consul reserves.
    ServiceRegistration(id="_herder-group-a1-api-api-http", name="api", address="127.0.0.1", port=2345,
                        meta={"consul-version": "1"}),
]


@pytest.mark.parametrize("refused", REFUSED, ids=["sidecar", "meta"])
def test_a_registration_consul_refuses_holds_up_no_other_service(
        refused: ServiceRegistration, own_consul: ConsulAgent) -> None:
    other = ServiceRegistration(id="_herder-group-a2-web-web-http", name="web", address="127.0.0.1", port=2346)
    backend = ConsulBackend({"address": own_consul.address}, Owner("scope", "session"))
    sync = ServiceSync(backend)
    sync.start()
    try:
        sync.set("a1/api", [refused])
        sync.set("a2/web", [other])
        assert sync.flush(TIMEOUT)
        assert other.id in own_consul.services()
        assert refused.id not in own_consul.services()
    finally:
        sync.set("a1/api", [])
        sync.set("a2/web", [])
        sync.flush(TIMEOUT)
        sync.close()
        backend.close()


DUPLICATE_EXPOSE = """
job "demo" {
  group "api" {
    network {
      mode = "bridge"
      port "http" { to = 9001 }
      port "health" {}
    }
    service {
      name = "api"
      port = "http"
      connect {
        sidecar_service {
          proxy {
            expose {
              path {
                path            = "/a"
                local_path_port = 9001
                listener_port   = "health"
              }
              path {
                path            = "/b"
                local_path_port = 9001
                listener_port   = "health"
              }
            }
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


def test_two_exposed_paths_on_one_listener_are_refused_naming_the_second() -> None:
    with pytest.raises(JobError) as refused:
        load_job_text(DUPLICATE_EXPOSE, "hcl", "job.hcl")
    assert "job.groups[0].services[0].connect.sidecar_service.proxy.expose.paths[1].listener_port" in str(refused.value)


def test_a_socket_that_cannot_be_made_leaves_no_other_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the agent restarts, a task plants a directory where Envoy's socket goes: the allocation's
    other socket, made first, was left relaying with its thread for good, one more at each try."""
    monkeypatch.setattr(ConnectPlugin, "envoy", staticmethod(lambda: True))
    consul = {"address": f"127.0.0.1:{free_ports(1)[0]}", "grpc_address": f"127.0.0.1:{free_ports(1)[0]}"}
    plugin = ConnectPlugin(SimpleNamespace(config=SimpleNamespace(consul=consul)), None)  # type: ignore[arg-type]
    tmp = tmp_path / "alloc" / "tmp"
    (tmp / GRPC_SOCKET).mkdir(parents=True)
    relays = {thread for thread in threading.enumerate() if thread.name.startswith("relay-")}
    try:
        for _ in range(3):
            with pytest.raises(OSError):
                plugin._ensure_relays("a1", tmp_path)
        assert {thread for thread in threading.enumerate() if thread.name.startswith("relay-")} == relays
        assert sorted(path.name for path in tmp.iterdir()) == [GRPC_SOCKET]
    finally:
        plugin.close()



def _sidecar_job(service: str, sidecar_task: str) -> str:
    return f"""
job "demo" {{
  group "api" {{
    network {{
      mode = "bridge"
      port "http" {{ to = 9001 }}
    }}
    service {{
      name = "{service}"
      port = "http"
      connect {{
        sidecar_service {{}}
        {sidecar_task}
      }}
    }}
    task "web" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
    }}
  }}
}}
"""


@pytest.mark.parametrize(("service", "sidecar_task", "where"), [
    ("a/../../../../tmp/x", "", "job.groups[0].services[0].name"),
    ("api", 'sidecar_task { name = "../x" }', "job.groups[0].services[0].connect.sidecar_task.name"),
    # Its own task name given, the service's still names its ports (connect-proxy-NAME, svc_NAME_ck_0).
    ("x\\u001b]0;owned\\u0007", 'sidecar_task { name = "proxy" }', "job.groups[0].services[0].name"),
])
def test_a_sidecar_task_is_named_as_any_task(service: str, sidecar_task: str, where: str) -> None:
    """The sidecar's task is named after its service (or by ``sidecar_task``): a name with ``/`` or ``..``
    was taken for a task, whose directory and log files the client would make there (herder run stopped
    on an internal error)."""
    with pytest.raises(JobError) as refused:
        load_job_text(_sidecar_job(service, sidecar_task), "hcl", "job.hcl")
    assert f"{where}:" in str(refused.value)


def test_a_sidecar_port_label_is_checked_as_any_port_label() -> None:
    """``sidecar_service.port`` names a label the group does not declare, which is added to its ports: one
    with a terminal's escape sequence was printed onto the operator's terminal (``port ... is``)."""
    text = _sidecar_job("api", "").replace("sidecar_service {}", 'sidecar_service { port = "x\\u001b]0;owned\\u0007" }')
    with pytest.raises(JobError) as refused:
        load_job_text(text, "hcl", "job.hcl")
    assert "job.groups[0].services[0].connect.sidecar_service.port:" in str(refused.value)
