"""Consul Connect in a group: what Nomad's job endpoint adds to a group whose services have a
``connect`` block, and the checks it makes (``nomad/job_endpoint_hook_connect.go``).

A service with a ``sidecar_service`` gets a sidecar proxy task, ``connect-proxy-<service>``
(prestart, sidecar), and a dynamic group port for the proxy's public listener,
``connect-proxy-<service>`` (or the label ``sidecar_service.port`` names), mapped to the
same port inside the namespace (Nomad's ``to = -1``). ``sidecar_task`` overrides the task's
fields. A ``native`` service starts no proxy. Sidecars need the group's own namespace
(``network { mode = "bridge" }`` or ``"cni/NAME"``): the proxy's upstreams listen on its
loopback, shared by every task of the allocation.

herder's default proxy is a ``raw_exec`` task running ``consul connect proxy`` (Consul's
built-in proxy) or, where ``envoy`` is installed, ``consul connect envoy``, which bootstraps
Envoy from the local agent and runs it: which one is decided on the node when the task
starts (``HERDER_CONNECT_PROXY``, and ``HERDER_CONNECT_PROXY_OPTION``: Envoy's admin listener,
or the built-in proxy's log level). Both find their registration with ``-sidecar-for`` and
reach the agent through the socket herder serves in the allocation's ``alloc/tmp``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from herder.jobspec.paths import Path
from herder.model import (
    Connect,
    ConnectProxy,
    ExposePath,
    Group,
    PortSpec,
    Service,
    SidecarService,
    Task,
    Upstream,
)

PROXY_PREFIX = "connect-proxy"
"""Nomad's prefix of a sidecar's task name, port label and ``Kind``."""
PROXY_MODE_VAR = "HERDER_CONNECT_PROXY"
"""Set by herder in a sidecar's environment: ``proxy`` (Consul's built-in proxy) or ``envoy``."""
PROXY_OPTION_VAR = "HERDER_CONNECT_PROXY_OPTION"
"""Set by herder in a sidecar's environment: the one option the proxy needs of its own, as one
argument (Envoy's admin listener, distinct for each sidecar of the allocation)."""
TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""A task's name, as the job schema has it: the sidecar's is made of its service's, which may hold anything."""
PORT_LABEL = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
"""A group port's label, as the job schema has it."""
NAMESPACE_MODES = ("bridge",)
"""Network modes that give an allocation a namespace of its own (besides ``cni/NAME``)."""

Problem = Callable[[Path, str], None]
TaskBuilder = Callable[[dict[str, Any], Path], Task]


def proxy_kind(service: str) -> str:
    """A sidecar task's ``kind`` for ``service``."""
    return f"{PROXY_PREFIX}:{service}"


def group_service_id(alloc_id: str, group: str, service: Service) -> str:
    """The ID a group service is registered under (SPEC §8)."""
    return f"_herder-group-{alloc_id}-{group}-{service.name}-{service.port}"


def sidecar_service_id(parent_id: str) -> str:
    """The ID of a service's sidecar registration, as Consul names the one it makes itself."""
    return f"{parent_id}-sidecar-proxy"


def default_sidecar(service_name: str, group_name: str, service_port: str) -> dict[str, Any]:
    """The canonical task Nomad adds for a service's sidecar, in herder's terms (a ``raw_exec``
    task running Consul's command line, in the allocation's namespace)."""
    parent = f"_herder-group-${{NOMAD_ALLOC_ID}}-{group_name}-{service_name}-{service_port}"
    return {
        "name": f"{PROXY_PREFIX}-{service_name}",
        "driver": "raw_exec",
        "config": {"command": "consul", "args": ["connect", f"${{{PROXY_MODE_VAR}}}", "-sidecar-for", parent,
                                                 f"${{{PROXY_OPTION_VAR}}}"]},
        "resources": {"cpu": 250, "memory": 128},
        "shutdown_delay": "5s",
        "logs": {"max_files": 2, "max_file_size": 2},
        "lifecycle": {"hook": "prestart", "sidecar": True},
    }


def sidecar_spec(service_name: str, group_name: str, service_port: str,
                 override: dict[str, Any] | None) -> dict[str, Any]:
    """The sidecar task's canonical spec: the default with ``sidecar_task``'s fields over it, as
    Nomad's ``SidecarTask.MergeIntoTask`` (maps merged key by key). A ``sidecar_task`` naming
    another driver starts from an empty ``config``: the default's is ``raw_exec``'s."""
    spec = default_sidecar(service_name, group_name, service_port)
    override = override or {}
    if override.get("driver", spec["driver"]) != spec["driver"]:
        spec["config"] = {}
    for key, value in override.items():
        if key in ("config", "env", "meta", "resources", "logs") and isinstance(value, dict):
            spec[key] = {**spec.get(key, {}), **value}
        else:
            spec[key] = value
    return spec


def sidecar_ports(services: list[Any], taken: tuple[PortSpec, ...], default_name: str) -> tuple[PortSpec, ...]:
    """The group ports Nomad injects for the sidecars of ``services`` (canonical specs; a service
    without a name is ``default_name``) and the listeners of their exposed checks: each label not
    declared yet, dynamic, mapped to the same port inside."""
    labels = {port.label for port in taken}
    added: list[PortSpec] = []
    for service in services:
        if not isinstance(service, dict):
            continue
        for label in _injected_labels(str(service.get("name", default_name)), service):
            if label not in labels:
                labels.add(label)
                added.append(PortSpec(label=label))
    return tuple(added)


def _injected_labels(name: str, service: dict[str, Any]) -> list[str]:
    sidecar = (service.get("connect") or {}).get("sidecar_service")
    if not isinstance(sidecar, dict):
        return []
    labels = [str(sidecar.get("port") or f"{PROXY_PREFIX}-{name}")]
    labels += [exposed_check_label(name, index)
               for index, check in enumerate(service.get("checks", [])) if check.get("expose")]
    return labels


def exposed_check_label(service: str, index: int) -> str:
    """The group port on which a service's exposed check is reached (Nomad: ``svc_<service>_ck_<id>``)."""
    return f"svc_{service}_ck_{index}"


def task_path(group: Group, group_index: int, task_index: int) -> Path:
    """Where the job file gives task ``task_index`` of a group: a sidecar herder added is its
    service's ``connect.sidecar_task`` (what the file has of it), any other task its own place."""
    task = group.tasks[task_index]
    for service_index, service in enumerate(group.services):
        connect = service.connect
        if task.kind and connect is not None and connect.sidecar is not None and connect.sidecar_task == task.name:
            return ("job", "groups", group_index, "services", service_index, "connect", "sidecar_task")
    return ("job", "groups", group_index, "tasks", task_index)


class ConnectBuilder:
    """The Connect parts of one group: its services' ``connect`` blocks, checked, and the sidecar
    tasks they need."""

    def __init__(self, problem: Problem, build_task: TaskBuilder, group: dict[str, Any], path: Path,
                 ports: tuple[PortSpec, ...]) -> None:
        self.problem = problem
        self.build_task = build_task
        self.group = group
        self.path = path
        self.ports = {port.label: port for port in ports}
        self.listeners: dict[str, str] = {}
        self.sidecars: list[Task] = []

    def connect(self, spec: dict[str, Any], path: Path, service: str, port: str,
                task_names: set[str]) -> Connect:
        """The ``connect`` block (at ``path``) of the group service ``service`` on ``port``."""
        if service != service.lower():
            self.problem((*path[:-1], "name"), "a Connect service's name must not contain uppercase letters "
                                               "(Consul assumes it)")
        native = bool(spec.get("native", False))
        sidecar_spec_ = spec.get("sidecar_service")
        if native and sidecar_spec_ is not None:
            self.problem(path, "a Connect service is native or has a sidecar_service, not both")
        if sidecar_spec_ is None:
            if not native:
                self.problem(path, "needs sidecar_service, or native = true")
            if "sidecar_task" in spec:
                self.problem((*path, "sidecar_task"), "is only for a service with a sidecar_service")
            return Connect(native=native)
        self.needs_namespace(path)
        if not PORT_LABEL.fullmatch(service):
            self.problem((*path[:-1], "name"), "a Connect service with a sidecar must have a name of letters, "
                                               "digits, '_' or '-': it names the sidecar's task and ports")
        if self.group["name"] != str(self.group["name"]).lower():
            self.problem((*self.path, "name"), "a group with a Connect sidecar must not have uppercase letters "
                                               "in its name (Consul assumes it)")
        sidecar = self.sidecar_service(sidecar_spec_, (*path, "sidecar_service"), service, port)
        task_path: Path = (*path, "sidecar_task")
        task = self.build_task(sidecar_spec(service, str(self.group["name"]), port, spec.get("sidecar_task")),
                               task_path)
        task = dataclasses.replace(task, kind=proxy_kind(service))
        if not TASK_NAME.fullmatch(task.name):  # a name sidecar_task gives is checked as any task's
            self.problem((*path[:-1], "name"), f"names the task of its sidecar, {task.name!r}, which must be 1-128 "
                                               "letters, digits, '_', '-' or '.'")
        if task.name in task_names or task.name in (t.name for t in self.sidecars):
            self.problem((*task_path, "name"), f"the sidecar task {task.name!r} has the name of another task "
                                               "of the group")
        self.sidecars.append(task)
        return Connect(sidecar=sidecar, sidecar_task=task.name)

    def needs_namespace(self, path: Path) -> None:
        mode = str((self.group.get("network") or {}).get("mode", "host"))
        if mode not in NAMESPACE_MODES and not mode.startswith("cni/"):
            self.problem(path, f'a Connect sidecar needs the group network mode "bridge" or "cni/NAME" '
                               f'(group {self.group["name"]!r} has {mode!r})')

    def sidecar_service(self, spec: dict[str, Any], path: Path, service: str, port: str) -> SidecarService:
        proxy_spec = spec.get("proxy", {})
        upstreams = []
        for index, up in enumerate(proxy_spec.get("upstreams", [])):
            upstream = Upstream(destination_name=up["destination_name"], local_bind_port=int(up["local_bind_port"]),
                                local_bind_address=up.get("local_bind_address", "127.0.0.1"),
                                datacenter=up.get("datacenter", ""))
            listener = f"{upstream.local_bind_address}:{upstream.local_bind_port}"
            if listener in self.listeners:
                self.problem((*path, "proxy", "upstreams", index, "local_bind_port"),
                             f"{listener} is the listener of another upstream of the group "
                             f"(of service {self.listeners[listener]!r})")
            self.listeners.setdefault(listener, service)
            upstreams.append(upstream)
        expose: list[ExposePath] = []
        for index, exposed in enumerate(proxy_spec.get("expose", {}).get("paths", [])):
            listener_port = str(exposed["listener_port"])
            if listener_port not in self.ports:
                self.problem((*path, "proxy", "expose", "paths", index, "listener_port"),
                             f"{listener_port!r} is not a port label of the group")
            elif listener_port in (other.listener_port for other in expose):
                # Consul refuses the sidecar's registration: each path is a listener of its own.
                self.problem((*path, "proxy", "expose", "paths", index, "listener_port"),
                             f"port {listener_port!r} is the listener of another exposed path")
            expose.append(ExposePath(path=exposed["path"], local_path_port=int(exposed["local_path_port"]),
                                     listener_port=listener_port, protocol=exposed.get("protocol", "http")))
        proxy = ConnectProxy(
            local_service_address=proxy_spec.get("local_service_address", "127.0.0.1"),
            local_service_port=int(proxy_spec.get("local_service_port", 0)),
            upstreams=tuple(upstreams), expose=tuple(expose), config=dict(proxy_spec.get("config", {})),
        )
        if "port" in spec and not PORT_LABEL.fullmatch(str(spec["port"])):
            # A label the group does not declare is added to it, unchecked as those are: it reaches the
            # environment's names and the operator's terminal.
            self.problem((*path, "port"), "must be letters, digits, '_' or '-' (a port label)")
        return SidecarService(port=str(spec.get("port") or f"{PROXY_PREFIX}-{service}"),
                              tags=tuple(spec.get("tags", [])), proxy=proxy,
                              disable_default_tcp_check=bool(spec.get("disable_default_tcp_check", False)))

    def exposed_checks(self, service: Service, path: Path) -> Service:
        """``service`` with its exposed checks (``check { expose = true }``) made as Nomad makes them: a
        path of the sidecar's ``expose`` block on a port of their own, which the check then targets."""
        connect = service.connect
        exposed = [(index, check) for index, check in enumerate(service.checks) if check.expose]
        if not exposed:
            return service
        if connect is None or connect.sidecar is None:
            for index, _ in exposed:
                self.problem((*path, "checks", index, "expose"), "is only for the checks of a service with a "
                                                                 "Connect sidecar_service")
            return service
        checks = list(service.checks)
        paths = list(connect.sidecar.proxy.expose)
        local_port = self.local_service_port(service, connect.sidecar.proxy)
        for index, check in exposed:
            if check.type not in ("http", "grpc"):
                self.problem((*path, "checks", index, "expose"), "only http and grpc checks can be exposed")
                continue
            label = exposed_check_label(service.name, index)
            if label in (other.listener_port for other in paths):
                self.problem((*path, "checks", index, "expose"), f"its port {label!r} is the listener of an "
                                                                 "exposed path of the sidecar")
                continue
            paths.append(ExposePath(path=check.path or f"/{check.grpc_service}", local_path_port=local_port,
                                    listener_port=label, protocol="http2" if check.type == "grpc" else "http"))
            checks[index] = dataclasses.replace(check, port=label)
        proxy = dataclasses.replace(connect.sidecar.proxy, expose=tuple(paths))
        sidecar = dataclasses.replace(connect.sidecar, proxy=proxy)
        return dataclasses.replace(service, checks=tuple(checks),
                                   connect=dataclasses.replace(connect, sidecar=sidecar))

    def local_service_port(self, service: Service, proxy: ConnectProxy) -> int:
        """The port the service listens on inside the namespace: the proxy's ``local_service_port``, else
        the ``to`` of the service's port (its host port is not known before placement: 0)."""
        if proxy.local_service_port:
            return proxy.local_service_port
        if service.port.isdigit():
            return int(service.port)
        port = self.ports.get(service.port)
        return port.to or port.static or 0 if port is not None else 0

