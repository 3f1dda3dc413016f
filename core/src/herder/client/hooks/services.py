"""Services: each running task's ``service`` blocks, in the registry, with health.

A task's services are registered after it starts (``herder_task_poststart``)
and taken out before it is killed (``herder_task_prekill``), so clients stop
sending traffic before it stops; a group's services (Nomad 1.x) live as long
as their allocation runs. Nothing here talks to the registry directly: the
desired set changes and :class:`herder.services.ServiceSync` reconciles.

Each service goes where its ``provider`` says, as in Nomad: ``nomad`` in the
embedded registry (:attr:`ServicesPlugin.native`, always there: it is what
templates' ``nomadService`` and the API's service listing read), ``consul``
in Consul (opened when a service first asks for it, unless it is the
configured backend), and a service naming none in the configured
``services.backend``. Each
registry has a sync loop of its own, so one that is down delays none of
the others.

Script checks run here, inside the task through the driver's exec, and are
reported as TTL checks. ``check_restart`` watches every check's status as the
sync reads it and restarts a task that stays unhealthy.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from herder import events, hookimpl
from herder.client.health import HealthChange
from herder.client.hooks.host import Host
from herder.client.hooks.sidecars import sidecar_registration
from herder.client.node import node_id
from herder.client.placement import GROUP_PORTS
from herder.client.sessions import is_alive
from herder.context import AllocatedPort, TaskContext
from herder.errors import HerderError
from herder.jobspec import interpolate_service, interpolate_task
from herder.model import Check, CheckRestart, Service, Task
from herder.objects import Alloc, AllocNetwork, ExitResult, TaskHandle
from herder.plugins.hooks import Hooks
from herder.services import (
    CRITICAL,
    PASSING,
    SCRIPT_TTL_GRACE,
    WARNING,
    Backend,
    CheckRegistration,
    CheckStatus,
    Owner,
    RegistryView,
    ServiceRegistration,
    ServiceSync,
    check_id,
    open_backend,
)
from herder.services.local import LocalRegistry
from herder.services.model import OUTPUT_LIMIT
from herder.services.native import NativeServices
from herder.services.probes import Scheduler

log = logging.getLogger(__name__)

GROUP = ""
"""The owner name of a group's services among its tasks' (no task is named "")."""

DEREGISTER_WAIT = 2.0
"""How long a task's kill waits for its services to leave a reachable registry."""

NATIVE = "local"
PROVIDERS = {"nomad": NATIVE, "consul": "consul"}
"""The registry (backend name) of each ``provider``: Nomad's own is herder's embedded one."""


@dataclass
class _Watched:
    """A registered check and whom it belongs to."""

    owner: str
    alloc_id: str
    alloc_name: str
    task: str
    service: str
    check: Check
    registration: CheckRegistration
    status: CheckStatus
    restart: _RestartWatch | None = None


@dataclass
class _RestartWatch:
    """Nomad's check_restart: after ``grace``, unhealthy for ``interval * (limit - 1)``
    (``limit`` consecutive results) restarts the task."""

    policy: CheckRestart
    interval: float
    grace_until: float
    unhealthy_since: float | None = None

    def observe(self, now: float, status: str) -> bool:
        """True when the task should be restarted now."""
        if now < self.grace_until:
            return False
        unhealthy = status == CRITICAL or (status == WARNING and not self.policy.ignore_warnings)
        if not unhealthy:
            self.unhealthy_since = None
            return False
        if self.unhealthy_since is None:
            self.unhealthy_since = now
        return now >= self.unhealthy_since + self.interval * (self.policy.limit - 1)


@dataclass
class _Running:
    """A running task, as script checks need it."""

    task: Task
    ctx: TaskContext
    handle: TaskHandle | None
    """None while the task has not started (a Connect sidecar registering its group's services)."""
    scripts: dict[str, Check] = field(default_factory=dict)


class ServicesPlugin:
    """The built-in ``services`` plugin of one client."""

    name = "services"

    def __init__(self, client: Host) -> None:
        self._client = client
        config = client.config
        scope = hashlib.sha1(f"{config.node_name}:{config.data_dir}".encode()).hexdigest()[:16]
        self._registrant = Owner(scope, client.session)
        self._lock = threading.Lock()
        self._started = False
        self.backend = self._open(config.services_backend)
        self.sync = self._new_sync(self.backend)
        """The configured backend's sync: where services naming no provider go, and the agent's own."""
        self._syncs = {config.services_backend: self.sync}
        self.native = self.backend if isinstance(self.backend, LocalRegistry) else LocalRegistry({}, self._registrant)
        if self.native is not self.backend:
            self._syncs[NATIVE] = self._new_sync(self.native)
        self.discovery = NativeServices(self.native, node_id(config.node_name, config.data_dir), config.datacenter)
        """The embedded registry as Nomad's native service discovery shows it."""
        self._scripts = Scheduler(self._run_script, name="script-checks")
        self._watched: dict[str, _Watched] = {}
        self._running: dict[str, _Running] = {}
        self._script_owner: dict[str, str] = {}
        self._script_registry: dict[str, str] = {}  # script check ID -> the backend it is reported to
        self._on_health: Callable[[HealthChange], None] = client.on_health

    def _open(self, name: str) -> Backend:
        config = self._client.config
        table = config.consul if name == "consul" else config.plugin.get(name, {})
        return open_backend(name, dict(table), self._registrant)

    def _new_sync(self, backend: Backend) -> ServiceSync:
        return ServiceSync(backend, on_view=self._observe, removable=self._removable)

    def _sync_of(self, name: str) -> ServiceSync:
        """The sync loop of the backend ``name``, opened now if no service asked for it before.

        :raises ConfigError: it cannot be opened.
        """
        with self._lock:
            sync = self._syncs.get(name)
            if sync is None:
                sync = self._syncs[name] = self._new_sync(self._open(name))
                if self._started:
                    sync.start()
            return sync

    def _all_syncs(self) -> dict[str, ServiceSync]:
        with self._lock:
            return dict(self._syncs)

    def start(self) -> None:
        with self._lock:
            self._started = True
        for sync in self._all_syncs().values():
            sync.start()

    def close(self) -> None:
        self._scripts.close()
        for sync in self._all_syncs().values():
            sync.close()
            sync.backend.close()

    def _set(self, owner: str, wanted: dict[str, list[ServiceRegistration]]) -> None:
        """Make ``wanted`` (by backend name) what ``owner`` has in every registry."""
        for name in wanted:
            self._sync_of(name)
        for name, sync in self._all_syncs().items():
            sync.set(owner, wanted.get(name, []))

    def _flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for every registry to hold what is wanted of it; whether they all do."""
        deadline = time.monotonic() + timeout
        return all([sync.flush(max(0.0, deadline - time.monotonic())) for sync in self._all_syncs().values()])

    def _removable(self, session: str) -> bool:
        """A service no task wants goes if this herder, or a herder that died, registered it."""
        return session == self._client.session or not is_alive(self._client.data_dir, session)

    # -- hooks ---------------------------------------------------------------

    @hookimpl
    def herder_task_poststart(self, task: Task, ctx: TaskContext, handle: TaskHandle) -> None:
        owner = _owner(ctx.alloc_id, task.name)
        running = _Running(task, ctx, handle)
        with self._lock:
            self._running[owner] = running
        prefix = f"_herder-task-{ctx.alloc_id}-{task.name}"
        self._set(owner, self._registrations(owner, ctx, handle, prefix, task.services, ctx.ports, running))
        self._group_poststart(task, ctx, handle, running)
        for script in running.scripts:
            self._scripts.add(script, running.scripts[script].interval)

    @hookimpl
    def herder_task_prekill(self, task: Task, ctx: TaskContext) -> None:
        self._forget(_owner(ctx.alloc_id, task.name))
        alloc = self._client.alloc(ctx.alloc_id)
        if alloc is not None and alloc.stopping:
            self._forget(_owner(ctx.alloc_id, GROUP))
        self._flush(DEREGISTER_WAIT)

    @hookimpl
    def herder_task_exited(self, task: Task, ctx: TaskContext, result: ExitResult) -> None:
        self._forget(_owner(ctx.alloc_id, task.name))

    @hookimpl
    def herder_alloc_postrun(self, alloc: Alloc) -> None:
        for name in (*(task.name for task in alloc.tasks), GROUP):
            self._forget(_owner(alloc.id, name))

    def _group_poststart(self, task: Task, ctx: TaskContext, handle: TaskHandle | None, running: _Running) -> None:
        """A group's services are registered when its first task starts (a Connect sidecar's
        before it starts: :meth:`register_group`); each task that starts runs the script checks
        that name it."""
        alloc = self._client.alloc(ctx.alloc_id)
        if alloc is None or not alloc.group.services:
            return
        placed = next(t for t in alloc.placed.tasks if t.task.name == task.name)
        lookup = placed.make_lookup(dict(ctx.env))
        services = tuple(interpolate_service(service, lookup) for service in alloc.group.services)
        owner = _owner(ctx.alloc_id, GROUP)
        ports = alloc.placed.ports.get(GROUP_PORTS, [])
        registrations = self._registrations(owner, ctx, None, f"_herder-group-{ctx.alloc_id}-{alloc.group.name}",
                                            services, ports, running, group=True)
        for registered in registrations.values():
            registered += self._sidecars(ctx, services, registered, ports, alloc.placed.alloc.network)
        self._set(owner, registrations)

    def register_group(self, task: Task, ctx: TaskContext, timeout: float) -> bool:
        """Register the group's services (and their Connect sidecars) before ``task`` starts, so
        that a sidecar proxy finds its registration when it starts; False unless the registry
        has them within ``timeout``."""
        self._group_poststart(task, ctx, None, _Running(task, ctx, None))
        return self._flush(timeout)

    def _sidecars(self, ctx: TaskContext, services: tuple[Service, ...], registrations: list[ServiceRegistration],
                  ports: list[AllocatedPort], network: AllocNetwork | None) -> list[ServiceRegistration]:
        """The registrations of the Connect sidecars of a group's ``services``, each beside its service's."""
        by_id = {registration.id: registration for registration in registrations}
        sidecars = []
        for service in services:
            parent = by_id.get(f"_herder-group-{ctx.alloc_id}-{ctx.group_name}-{service.name}-{service.port}")
            try:
                sidecar = sidecar_registration(service, parent, ports, network) if parent is not None else None
            except HerderError as exc:
                ctx.emit_event(events.TASK_HOOK_FAILED, f"the sidecar of service {service.name} is not "
                                                        f"registered: {exc}", plugin=self.name)
                continue
            if sidecar is not None:
                sidecars.append(sidecar)
        return sidecars

    def refresh(self, alloc_id: str) -> None:
        """Register the services of an allocation updated in place as its new version gives them
        (names, tags, meta, checks), for the tasks that run: replaced in the desired set, never
        taken out of the registry between the two."""
        alloc = self._client.alloc(alloc_id)
        if alloc is None:
            return
        with self._lock:
            running = [(owner, r) for owner, r in self._running.items() if r.ctx.alloc_id == alloc_id]
        self._forget(_owner(alloc_id, GROUP), deregister=False)
        for owner, was in running:
            placed = next((t for t in alloc.placed.tasks if t.task.name == was.task.name), None)
            if placed is None or was.handle is None:  # only started tasks are kept as running
                continue
            self._forget(owner, deregister=False)
            task = interpolate_task(placed.task, placed.make_lookup(dict(was.ctx.env)))
            self.herder_task_poststart(task, was.ctx, was.handle)

    # -- building registrations -------------------------------------------------

    def _registrations(self, owner: str, ctx: TaskContext, handle: TaskHandle | None, prefix: str,
                       services: tuple[Service, ...], ports: list[AllocatedPort], running: _Running,
                       group: bool = False) -> dict[str, list[ServiceRegistration]]:
        """The registrations of ``services``, by the backend each goes to, with ``running``
        the task starting now; a service that cannot be registered (nor its registry opened)
        is told as an event. Of a group's services, only the script checks that name the
        task run in it."""
        registrations: dict[str, list[ServiceRegistration]] = {}
        for service in services:
            try:
                backend = PROVIDERS.get(service.provider) or self._client.config.services_backend
                self._sync_of(backend)
                registration = self._registration(owner, ctx, handle, prefix, service, ports, running, group)
                registrations.setdefault(backend, []).append(registration)
                with self._lock:
                    self._script_registry.update(
                        (check.id, backend) for check in registration.checks if check.id in running.scripts)
            except HerderError as exc:
                ctx.emit_event(events.TASK_HOOK_FAILED, f"service {service.name} is not registered: {exc}",
                               hook="herder_task_poststart", plugin=self.name)
        return registrations

    def _registration(self, owner: str, ctx: TaskContext, handle: TaskHandle | None, prefix: str,
                      service: Service, ports: list[AllocatedPort], running: _Running,
                      group: bool) -> ServiceRegistration:
        isolated = ctx.network is not None
        address, port = _address(service.address_mode, service.port, ports, handle, isolated)
        service_id = f"{prefix}-{service.name}-{service.port}"
        checks = []
        for check in service.checks:
            registration = _check_registration(service_id, check, service.port, ports, handle, isolated)
            checks.append(registration)
            # Shown with, and restarted with, the task it runs in: for a group's check
            # the task it names, else the first of the group's tasks to start.
            runs_in = (check.task or ctx.task_name) if group else ctx.task_name
            if check.type == "script" and runs_in == ctx.task_name:
                running.scripts[registration.id] = check
                with self._lock:
                    self._script_owner[registration.id] = _owner(ctx.alloc_id, ctx.task_name)
            self._watch(_Watched(owner, ctx.alloc_id, ctx.alloc_name, runs_in, service.name, check,
                                 registration, CheckStatus(check.initial_status or CRITICAL)))
        return ServiceRegistration(id=service_id, name=service.name, address=address, port=port,
                                   tags=service.tags, meta=service.meta, checks=tuple(checks),
                                   job_id=ctx.job_name, alloc_id=ctx.alloc_id,
                                   connect_native=service.connect is not None and service.connect.native)

    # -- what is shown ---------------------------------------------------------

    def health(self, alloc_id: str) -> dict[str, list[dict[str, str]]]:
        """The checks of an allocation's services, by task: service, check, status, output."""
        with self._lock:
            watched = [w for w in self._watched.values() if w.alloc_id == alloc_id]
        result: dict[str, list[dict[str, str]]] = {}
        for w in watched:
            result.setdefault(w.task, []).append({"service": w.service, "check": w.check.name,
                                                  "status": w.status.status, "output": w.status.output})
        return result

    def _watch(self, watched: _Watched) -> None:
        """Follow a check's status; one already followed (a group's, as another task starts) goes on."""
        policy = watched.check.check_restart
        if policy is not None and policy.limit > 0:
            watched.restart = _RestartWatch(policy, watched.check.interval, time.monotonic() + policy.grace)
        with self._lock:
            self._watched.setdefault(watched.registration.id, watched)

    def _forget(self, owner: str, *, deregister: bool = True) -> None:
        """Stop following ``owner``'s checks; its services leave the registry unless they are
        to be registered again at once (not ``deregister``)."""
        with self._lock:
            running = self._running.pop(owner, None)
            for check in [cid for cid, w in self._watched.items() if w.owner == owner]:
                del self._watched[check]
            for check in [cid for cid, o in self._script_owner.items() if o == owner]:
                del self._script_owner[check]
                self._script_registry.pop(check, None)
        for check in running.scripts if running else ():
            self._scripts.remove(check)
        if deregister:
            for sync in self._all_syncs().values():
                sync.remove(owner)

    # -- checks ------------------------------------------------------------

    def _run_script(self, check_id_: str) -> None:
        with self._lock:
            running = self._running.get(self._script_owner.get(check_id_, ""))
            registry = self._script_registry.get(check_id_, "")
        check = running.scripts.get(check_id_) if running else None
        if running is None or check is None:
            return
        status = run_script(self._client.hooks, running, check)
        sync = self._all_syncs().get(registry)
        if sync is not None:
            sync.report(check_id_, status)

    def _observe(self, view: RegistryView) -> None:
        """Every read of the registry: status changes are told, unhealthy tasks restarted."""
        now = time.monotonic()
        changed: list[_Watched] = []
        restart: list[_Watched] = []
        with self._lock:
            for cid, watched in self._watched.items():
                status = view.checks.get(cid)
                if status is None:
                    continue  # not registered yet
                if status.status != watched.status.status:
                    changed.append(watched)
                watched.status = status
                if watched.restart is not None and watched.restart.observe(now, status.status):
                    watched.restart = None  # once: the task's next start watches afresh
                    restart.append(watched)
        for watched in changed:
            self._on_health(HealthChange(watched.alloc_id, watched.alloc_name, watched.task, watched.service,
                                         watched.check.name, watched.status.status, watched.status.output))
        for watched in restart:
            reason = f"healthcheck: check {watched.check.name!r} unhealthy"
            # Not on this thread: the restart's prekill waits for this loop.
            threading.Thread(target=self._client.restart_task, args=(watched.alloc_id, watched.task, reason),
                             kwargs={"failure": True}, daemon=True).start()


def run_script(hooks: Hooks, running: _Running, check: Check) -> CheckStatus:
    """Run a script check inside the task: exit 0 passing, 1 warning, anything
    else (an error, a timeout) critical, with the output as the note."""
    command = [check.command, *check.args]
    if running.handle is None:
        return CheckStatus(CRITICAL, f"task {running.task.name} has not started")
    try:
        result = hooks.task_exec(running.task, running.ctx, running.handle, command, check.timeout)
    except Exception as exc:  # the driver's failure is the check's result
        return CheckStatus(CRITICAL, f"{exc or type(exc).__name__}"[:OUTPUT_LIMIT])
    status = PASSING if result.exit_code == 0 else WARNING if result.exit_code == 1 else CRITICAL
    return CheckStatus(status, result.output[:OUTPUT_LIMIT].decode(errors="replace"))


def _owner(alloc_id: str, task: str) -> str:
    return f"{alloc_id}/{task}"


def _find_port(label: str, ports: list[AllocatedPort]) -> AllocatedPort | None:
    return next((port for port in ports if port.label == label), None)


def _address(mode: str, port: str, ports: list[AllocatedPort], handle: TaskHandle | None,
             isolated: bool = False) -> tuple[str, int]:
    """The address and port to advertise for ``port`` (a label or a number) in ``mode``;
    ``handle`` is None for a group service, which has the host's network. In an allocation's
    namespace (``isolated``) ``auto`` is the host's address and port, which reach it from outside."""
    network = handle.network if handle is not None else None
    if mode == "auto":
        mode = "driver" if network is not None and network.auto_advertise and not isolated else "host"
    allocated = _find_port(port, ports) if port and not port.isdigit() else None
    if mode == "driver":
        if network is None:
            raise HerderError("address_mode driver: there is no driver network (a group service, or a driver "
                              "that gives its tasks none)")
        if port.isdigit():
            return network.ip, int(port)
        mapped = network.port_map.get(port) or (allocated.to if allocated else None)
        if not mapped:
            raise HerderError(f"address_mode driver: port {port!r} is not mapped by the driver")
        return network.ip, mapped
    host = ports[0].host_ip if ports else "127.0.0.1"
    if allocated is not None:
        return allocated.host_ip, allocated.value
    return host, int(port) if port.isdigit() else 0


def _check_registration(service_id: str, check: Check, service_port: str, ports: list[AllocatedPort],
                        handle: TaskHandle | None, isolated: bool = False) -> CheckRegistration:
    cid = check_id(service_id, check)
    if check.type == "script":
        return CheckRegistration(id=cid, name=check.name, kind="ttl", ttl=check.interval + SCRIPT_TTL_GRACE,
                                 initial_status=check.initial_status)
    address, port = _address(check.address_mode, check.port or service_port, ports, handle, isolated)
    host = f"[{address}]" if ":" in address else address
    if check.type == "http":
        target = f"{check.protocol}://{host}:{port}{check.path}"
    elif check.type == "grpc":
        target = f"{host}:{port}" + (f"/{check.grpc_service}" if check.grpc_service else "")
    else:
        target = f"{host}:{port}"
    return CheckRegistration(id=cid, name=check.name, kind=check.type, interval=check.interval,
                             timeout=check.timeout, target=target, method=check.method, header=check.header,
                             tls_skip_verify=check.tls_skip_verify, grpc_use_tls=check.grpc_use_tls,
                             initial_status=check.initial_status)
