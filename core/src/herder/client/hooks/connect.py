"""Connect: what a sidecar proxy needs around its task (Nomad's ``envoy_bootstrap_hook``,
``consul_http_sock_hook`` and ``consul_grpc_sock_hook``).

An allocation whose group has a Connect sidecar gets a socket in its
``alloc/tmp`` that reaches the Consul agent (``consul_http.sock``; and
``consul_grpc.sock`` for Envoy, which takes its configuration over gRPC):
the proxies run in the allocation's network namespace, where the agent's
loopback address is not the host's. Before a sidecar task starts, its
group's services and the sidecar's own registration are in Consul, and its
environment says where the agent is (``CONSUL_HTTP_ADDR``, ``CONSUL_GRPC_ADDR``)
and which proxy to run (``HERDER_CONNECT_PROXY``: ``envoy`` where Envoy is
installed, else ``proxy``, Consul's built-in one).
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

from herder import events, hookimpl
from herder.client.hooks.host import Host
from herder.client.hooks.services import ServicesPlugin
from herder.client.unix_relay import ConnectionBudget, UnixRelay
from herder.context import TaskContext
from herder.errors import HerderError, RecoverableError
from herder.jobspec.connect import PROXY_MODE_VAR, PROXY_OPTION_VAR, PROXY_PREFIX
from herder.model import Group, Task
from herder.objects import Alloc, TaskEvent
from herder.sdk.env import get_var

HTTP_SOCKET, GRPC_SOCKET = "consul_http.sock", "consul_grpc.sock"
DEFAULT_GRPC_ADDRESS = "127.0.0.1:8502"
"""Consul's gRPC port, as Nomad's ``consul.grpc_address`` default."""
REGISTER_WAIT = 30.0
"""How long a sidecar's start waits for its registration to reach Consul before it is retried."""
ENVOY_ADMIN_PORT = 19000
"""The first sidecar's Envoy admin port in the namespace (Nomad's and Consul's default); the next +1."""
CONSUL_CONNECTIONS = 96
"""The connections the sockets of all allocations may hold to Consul at once: about half of what Consul
takes from one address (``limits.http_max_conns_per_client``, 200), which the agent's own connections
and other programs of the host share; the allocations of a few jobs cannot lock them out of Consul."""
MAX_SOCKET_PATH = 107
"""The longest path a Unix socket address holds (``sun_path`` less its terminating NUL)."""


def has_sidecar(group: Group) -> bool:
    return any(service.connect is not None and service.connect.sidecar is not None for service in group.services)


def is_proxy(task: Task) -> bool:
    return task.kind.startswith(PROXY_PREFIX + ":")


class ConnectPlugin:
    """The built-in ``connect`` plugin of one client."""

    name = "connect"

    def __init__(self, client: Host, services: ServicesPlugin) -> None:
        self._client = client
        self._services = services
        consul = client.config.consul
        self._http = _host_port(str(consul.get("address") or "127.0.0.1:8500"), 8500)
        self._grpc = _host_port(str(consul.get("grpc_address") or DEFAULT_GRPC_ADDRESS), 8502)
        self._lock = threading.Lock()
        self._relays: dict[str, list[UnixRelay]] = {}
        self._budget = ConnectionBudget(CONSUL_CONNECTIONS)

    def start(self) -> None:
        pass

    def close(self) -> None:
        with self._lock:
            relays = [relay for relays in self._relays.values() for relay in relays]
            self._relays.clear()
        for relay in relays:
            relay.close()

    @staticmethod
    def envoy() -> bool:
        """Whether the sidecars run Envoy: it is on the PATH their tasks inherit."""
        return shutil.which("envoy") is not None

    # -- hooks ---------------------------------------------------------------

    @hookimpl
    def herder_alloc_prerun(self, alloc: Alloc) -> None:
        runner = self._client.alloc(alloc.id)
        if runner is not None and has_sidecar(runner.group):
            self._ensure_relays(alloc.id, alloc.dir)

    @hookimpl
    def herder_alloc_postrun(self, alloc: Alloc) -> None:
        with self._lock:
            relays = self._relays.pop(alloc.id, [])
        for relay in relays:
            relay.close()

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        if not is_proxy(task):
            return
        if self._client.config.services_backend != "consul":
            raise HerderError(f"task {task.name} is a Consul Connect sidecar: it needs services.backend = "
                              f'"consul" (this herder registers services in {self._client.config.services_backend!r})')
        alloc_dir = ctx.task_dir.alloc_dir.parent
        envoy = self._ensure_relays(ctx.alloc_id, alloc_dir)
        ctx.env[PROXY_MODE_VAR] = "envoy" if envoy else "proxy"
        ctx.env[PROXY_OPTION_VAR] = f"-admin-bind=127.0.0.1:{ENVOY_ADMIN_PORT + self._index(task, ctx)}" \
            if envoy else "-log-level=info"
        ctx.env["CONSUL_HTTP_ADDR"] = "unix://" + _socket_address(ctx, HTTP_SOCKET)
        if envoy:
            ctx.env["CONSUL_GRPC_ADDR"] = "unix://" + _socket_address(ctx, GRPC_SOCKET)
        if not self._services.register_group(task, ctx, REGISTER_WAIT):
            raise RecoverableError(f"the Connect services of group {ctx.group_name} are not in Consul yet "
                                   f"(at {self._services.backend.name})")

    def _index(self, task: Task, ctx: TaskContext) -> int:
        """The sidecar's place among its group's: each Envoy's admin listener is on a port of its own."""
        runner = self._client.alloc(ctx.alloc_id)
        proxies = [t.name for t in runner.group.tasks if is_proxy(t)] if runner is not None else []
        return proxies.index(task.name) if task.name in proxies else 0

    @hookimpl
    def herder_task_event(self, task: Task, ctx: TaskContext, event: TaskEvent) -> None:
        """A sidecar an earlier herder started, reattached: its allocation's sockets are made again
        (a restored allocation's prerun is not run again), or the proxy, still running, could not
        reach Consul to authorize a connection or renew its certificate."""
        if event.type == events.REATTACHED and is_proxy(task):
            self._ensure_relays(ctx.alloc_id, ctx.task_dir.alloc_dir.parent)

    def _ensure_relays(self, alloc_id: str, alloc_dir: Path) -> bool:
        """The allocation's sockets to Consul, made once; whether they include Envoy's gRPC one."""
        envoy = self.envoy()
        with self._lock:
            if alloc_id not in self._relays:
                tmp = alloc_dir / "alloc" / "tmp"
                relays = [UnixRelay(tmp, HTTP_SOCKET, self._http, self._budget)]
                if envoy:
                    try:
                        relays.append(UnixRelay(tmp, GRPC_SOCKET, self._grpc, self._budget))
                    except BaseException:
                        # Not kept, so never closed: its thread would relay on after the allocation.
                        relays[0].close()
                        raise
                self._relays[alloc_id] = relays
            return len(self._relays[alloc_id]) > 1


def _socket_address(ctx: TaskContext, name: str) -> str:
    """The socket ``name`` of ``alloc/tmp`` as the task sees it: under its ``NOMAD_ALLOC_DIR``, or,
    where that path is too long for a socket address, relative to the task's directory (its
    working directory), which is beside the allocation's shared one."""
    alloc_dir = get_var(ctx.env, "ALLOC_DIR") or str(ctx.task_dir.alloc_dir)
    path = f"{alloc_dir}/tmp/{name}"
    return path if len(path.encode()) <= MAX_SOCKET_PATH else f"../alloc/tmp/{name}"


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    url = urlsplit(address if "://" in address else f"http://{address}")
    return url.hostname or "127.0.0.1", url.port or default_port
