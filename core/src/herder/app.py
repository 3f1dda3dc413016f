"""The use cases every front end shares.

The command line and the agent only translate between their medium and
these: reading a job, describing drivers and plugins, running a job in the
foreground, reaping what a dead foreground run left behind, the JSON shapes
of events and summaries, and the agent's long-lived client (:class:`Agent`):
jobs submitted and replaced, allocations found by ID prefix, the tasks a
signal, restart or exec is for, draining, and the agent's own service.

The Nomad integration, a front end too, reaches herder only through
``herder``, ``herder.sdk`` and this module: what it needs beside the use cases
is re-exported here (the ``import X as X`` lines).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal as _signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from herder import __version__
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.client import STATE_FILE as STATE_FILE
from herder.client.client import Client, JobSource
from herder.client.config import Config
from herder.client.deferred import DeferredCleanups as DeferredCleanups
from herder.client.gc import Collected, GarbageCollector
from herder.client.health import HealthChange
from herder.client.hooks.services import ServicesPlugin
from herder.client.lifecycle import TaskLifecycle as TaskLifecycle
from herder.client.periodic import Launcher
from herder.client.script import AwaitExit as AwaitExit
from herder.client.script import Failed as Failed
from herder.client.script import Ran as Ran
from herder.client.script import Stepper as Stepper
from herder.client.script import Stop as Stop
from herder.client.script import TaskScript as TaskScript
from herder.client.script import Woke as Woke
from herder.client.script import run_through as run_through
from herder.client.stats import StatsSampler as StatsSampler
from herder.client.stats import UsageCollector
from herder.client.task_runner import TaskRunner
from herder.errors import DispatchError, HerderError, JobError, PlacementError
from herder.jobspec import JobFiles, evaluate_job_text, load_job_text, validate_task_configs
from herder.jobspec.dispatch import PERIODIC_SUFFIX, Child, dispatch_child, periodic_child
from herder.jobspec.formats import format_of, read_text, read_var_file
from herder.model import Job
from herder.model import Resources as Resources
from herder.objects import ExecSession, TaskHandle, TaskStats
from herder.objects import parse_signal as parse_signal
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from herder.services import PASSING, CheckRegistration, CheckStatus, ServiceRegistration
from herder.state import LIVE_STATUSES, ParentRecord, ParentStatus
from herder.state import StateError as StateError
from herder.state import Store as Store
from herder.supervisor import Supervisor as Supervisor

log = logging.getLogger("herder.agent")

# -- plugins and drivers -----------------------------------------------------


def load_hooks(config: Config) -> Hooks:
    """Every installed plugin, as the configuration enables them."""
    return Hooks(load_plugins(plugin_tables(config), config.disabled_plugins))


def plugin_tables(config: Config) -> dict[str, dict[str, Any]]:
    """The ``[plugin.NAME]`` tables the plugins are created with.

    A plain, unisolated JVM is no more isolated than a raw_exec task: the java
    driver allows them (``allow_unisolated``) exactly where raw_exec is enabled
    (``herder run``'s default; the agent's only with ``[plugin.raw_exec]
    enabled = true``), unless its own table says otherwise. A plugin knows
    nothing of another's table, so this is said here.
    """
    tables = {name: dict(table) for name, table in config.plugin.items()}
    raw_exec = "raw_exec" not in config.disabled_plugins and bool(tables.get("raw_exec", {}).get("enabled", True))
    tables.setdefault("java", {}).setdefault("allow_unisolated", raw_exec)
    return tables


def failed_plugins(hooks: Hooks) -> list[str]:
    """One warning per plugin that could not be loaded."""
    return [f"plugin {r.name} ({r.distribution} {r.version}) was not loaded: {r.error}"
            for r in hooks.plugins.records if r.error]


def driver_rows(hooks: Hooks) -> list[dict[str, Any]]:
    """Every driver with its distribution and fingerprint: ``herder drivers``, ``GET /v1/drivers``."""
    rows: list[dict[str, Any]] = []
    for name in hooks.drivers:
        fingerprint = hooks.fingerprint(name)
        record = hooks.plugins.record(name)
        rows.append({"name": name, "distribution": record.distribution if record else "",
                     "version": record.version if record else "", "detected": fingerprint.detected,
                     "healthy": fingerprint.healthy, "description": fingerprint.description,
                     "attributes": dict(sorted(fingerprint.attributes.items()))})
    return rows


def plugin_rows(hooks: Hooks) -> list[dict[str, Any]]:
    """Every plugin, loaded or failed: ``herder plugins``, ``GET /v1/plugins``."""
    return [r.to_json() for r in sorted(hooks.plugins.records, key=lambda r: (r.kind, r.name))]


# -- jobs --------------------------------------------------------------------


def parse_variables(items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a mapping; :class:`JobError` for one without ``=``."""
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise JobError([f"--var {item!r}: expected KEY=VALUE"])
        values[key] = value
    return values


def evaluate_job(path: Path, variables: Mapping[str, str], var_files: Sequence[Path] = (), *,
                 allow_file_outside: bool = False) -> tuple[Job, JobSource]:
    """Read and evaluate the job file at ``path`` on the user's side: its
    variables, and ``file()`` relative to its directory (inside it unless
    ``allow_file_outside``). The source given back is the evaluated canonical
    document, which rebuilds the same job without variables or files: what
    ``herder job run`` submits, and what a foreground run stores.

    ``var_files`` (``--var-file``) give values in order, a later file winning;
    ``variables`` (``--var``) win over them all, as in Nomad.

    :raises JobError: listing every problem, each with its path.
    """
    given: dict[str, str] = {}
    for var_file in var_files:
        given |= read_var_file(var_file)
    given |= variables
    job, document = evaluate_job_text(read_text(path), format_of(path), str(path), given,
                                      JobFiles(path.parent, allow_file_outside))
    return job, JobSource(text=json.dumps(document), format="json", source=str(path))


def read_job(path: Path, variables: Mapping[str, str], hooks: Hooks, var_files: Sequence[Path] = (), *,
             allow_file_outside: bool = False) -> tuple[Job, JobSource]:
    """Parse and validate the job file at ``path`` (see :func:`evaluate_job`), each task's config included.

    :raises JobError: listing every problem, each with its path.
    """
    job, source = evaluate_job(path, variables, var_files, allow_file_outside=allow_file_outside)
    check_task_configs(job, hooks)
    return job, source


def load_submitted(source: JobSource, hooks: Hooks, lines: Mapping[str, int] | None = None) -> Job:
    """A job from text submitted to the agent, which reads no file, validated
    against the drivers' config schemas. ``lines`` (the line of each path in
    the file a canonical document was evaluated from) place the messages."""
    job = load_job_text(source.text, source.format, source.source, source.variables)
    if lines:
        job.lines = dict(lines)
    check_task_configs(job, hooks)
    return job


def dispatch_once(source: JobSource, meta: Mapping[str, str], payload: bytes) -> tuple[Job, JobSource]:
    """The child of a parameterized job dispatched now, to run in its place: made from
    ``source``, the job's evaluated canonical document (as :func:`evaluate_job` gives it).

    :raises DispatchError: the dispatch breaks the job's ``parameterized`` block, each problem said.
    """
    child = dispatch_child(json.loads(source.text), meta, payload, datetime.now(UTC))
    return child.job, child_source(child, source)


def check_task_configs(job: Job, hooks: Hooks) -> None:
    """Every task's driver is there and its config is valid; :class:`JobError` otherwise."""
    errors = validate_task_configs(job, hooks.task_schemas(), hooks.plugins.unavailable())
    if errors:
        raise JobError(errors)


# -- JSON shapes -------------------------------------------------------------


def rfc3339(time: datetime) -> str:
    return time.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def event_json(record: EventRecord) -> dict[str, Any]:
    """One event in the documented ``herder run --json`` shape."""
    event = record.event
    return {"time": rfc3339(event.time), "alloc_id": record.alloc_id, "alloc_name": record.alloc_name,
            "task": record.task, "type": event.type, "message": event.message,
            "details": json.loads(json.dumps(event.details, default=str))}


def health_json(change: HealthChange) -> dict[str, Any]:
    """A service check's status change in the documented ``herder run --json`` shape."""
    return {"time": rfc3339(datetime.now(UTC)), "alloc_id": change.alloc_id, "alloc_name": change.alloc_name,
            "task": change.task, "check": {"service": change.service, "name": change.check,
                                           "status": change.status, "output": change.output}}


class HealthLog:
    """The last status of every service check seen, by allocation and task."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
        self._lock = threading.Lock()

    def record(self, change: HealthChange) -> None:
        with self._lock:
            self._last.setdefault((change.alloc_id, change.task), {})[(change.service, change.check)] = \
                change.status

    def checks(self, alloc_id: str, task: str) -> list[dict[str, str]]:
        with self._lock:
            last = dict(self._last.get((alloc_id, task), {}))
        return [{"service": service, "check": check, "status": status}
                for (service, check), status in sorted(last.items())]


def summary(status: str, allocs: Iterable[AllocRunner], health: HealthLog | None = None) -> dict[str, Any]:
    """The ``herder run --json`` summary (docs/user-guide.md)."""
    health = health or HealthLog()
    return {"status": status, "allocs": {
        a.alloc.id: {"name": a.alloc.name, "tasks": {
            t.name: {"state": t.status.state, "failed": t.status.failed, "restarts": t.status.restarts,
                     "exit_code": t.status.exit_code, "checks": health.checks(a.alloc.id, t.name)}
            for t in a.tasks}}
        for a in allocs}}


# -- periodic jobs -------------------------------------------------------------


def children_of(name: str, allocs: Iterable[AllocRunner]) -> list[AllocRunner]:
    """The allocations of the children of job ``name``."""
    return [a for a in allocs if a.job.parent_id == name]


def overlapped(parent: Job, children: Iterable[AllocRunner], *, forced: bool = False) -> list[str]:
    """The children of periodic job ``parent`` still running that its ``prohibit_overlap``
    makes a launch skip; none for a forced launch, as Nomad's."""
    assert parent.periodic is not None
    if not parent.periodic.prohibit_overlap or forced:
        return []
    return sorted({a.job.name for a in children if a.status in LIVE_STATUSES})


def child_source(child: Child, parent: JobSource) -> JobSource:
    """What a child is submitted as: its canonical document, from where its parent came."""
    return JobSource(text=json.dumps(child.document), format="json", source=parent.source)


# -- running in the foreground -----------------------------------------------


@dataclass
class Reaped:
    """What a foreground run found left behind by herders that died, and stopped."""

    orphans: list[AllocRunner] = field(default_factory=list)
    replaced: list[AllocRunner] = field(default_factory=list)


class ForegroundRun:
    """``herder run``: one job on this host until its tasks finish or it is stopped.

    Its tasks belong to this process: if it dies, the supervisor stops them
    and runs ``herder reap`` to clean up. With ``keep`` they are left running
    instead, and the next ``herder run`` of the same job on the same data dir
    reattaches to them. A job file that changed meanwhile replaces them.
    """

    def __init__(self, config: Config, hooks: Hooks, job: Job, source: JobSource, *,
                 on_event: Callable[[EventRecord], None],
                 on_health: Callable[[HealthChange], None] = lambda change: None,
                 on_message: Callable[[str], None] = lambda text: None, keep: bool = False) -> None:
        self.job = job
        self.source = source
        self.health = HealthLog()
        self._on_message = on_message

        def health_changed(change: HealthChange) -> None:
            self.health.record(change)
            on_health(change)

        self.client = Client(config, hooks, keep=keep, on_event=on_event, on_health=health_changed,
                             on_lost=None if keep else {"argv": reap_command(config), "env": dict(os.environ)})
        self.allocs: list[AllocRunner] = []
        self.reaped = Reaped()
        self._stop_requested = threading.Event()
        self._launches = threading.Lock()  # a periodic job's: its children join allocs in the launcher's thread
        self._launcher = Launcher(self._launch)

    def place(self) -> None:
        """Take over what earlier runs left, then place the job's allocations if
        none of them is already running.

        :raises PlacementError: nothing is placed.
        """
        client = self.client
        self.reaped.orphans = client.restore(keep=False)
        mine = client.restore(job_name=self.job.name)
        adopted = [a for a in mine if a.job_id == self.source.id]
        self.reaped.replaced = [a for a in mine if a not in adopted]
        stale = self.reaped.orphans + self.reaped.replaced
        client.run(stale)
        for alloc in stale:
            alloc.stop()
        # A periodic job is not run itself: its children are, at their times (run()).
        self.allocs = adopted or ([] if self.job.periodic is not None else client.submit(self.job, self.source))

    def run(self) -> str:
        """Run every allocation to the end, or a periodic job's children until it is
        stopped; returns "complete", "failed" or "stopped"."""
        self.client.start()
        if self._stop_requested.is_set():  # asked to stop while placing: nothing runs
            self.stop()
        self.client.run(self.allocs)
        if self.job.periodic is not None:
            self._follow_schedule()
        while not self.client.wait(self._everything(), timeout=0.5):
            pass  # short waits, so that signal handlers run promptly in the main thread
        if any(a.failed for a in self.allocs):
            return "failed"
        return "stopped" if self._stop_requested.is_set() else "complete"

    def _everything(self) -> list[AllocRunner]:
        with self._launches:
            return self.allocs + self.reaped.orphans + self.reaped.replaced

    def _follow_schedule(self) -> None:
        """Launch the periodic job's children at their times until asked to stop."""
        name = self.job.name
        if not self.job.launches:
            self._on_message(f"Job {name}: its periodic launches are disabled, nothing runs")
            return
        assert self.job.periodic is not None
        self.client.node()  # the drivers' fingerprints, taken now rather than late by the first launch
        first = self._launcher.add(name, self.job.periodic)
        self._on_message(f"Job {name}: periodic ({' | '.join(self.job.periodic.crons)}), first launch at "
                         f"{rfc3339(first) if first else 'none'}")
        self._launcher.start()
        while not self._stop_requested.wait(0.5):  # short waits, so that signal handlers run promptly
            pass
        self._launcher.stop()

    def _launch(self, name: str, at: datetime) -> None:
        with self._launches:
            if self._stop_requested.is_set():
                return
            running = overlapped(self.job, self.allocs)
            if running:
                self._on_message(f"Job {name}: launch at {rfc3339(at)} skipped, {', '.join(running)} still "
                                 "running (prohibit_overlap)")
                return
            child = periodic_child(json.loads(self.source.text), at)
            allocs = self.client.submit(child.job, child_source(child, self.source))
            self.allocs += allocs
            self.client.run(allocs)
        following = self._launcher.next_launch(name)
        self._on_message(f"Job {name}: launched {child.job.name}; next launch at "
                         f"{rfc3339(following) if following else 'none'}")

    def stop(self) -> None:
        """Stop every task gracefully, and a periodic job's launches; safe to call from a signal handler's thread."""
        with self._launches:
            self._stop_requested.set()
            allocs = list(self.allocs)
        for alloc in allocs:
            alloc.stop()

    def summary(self, status: str) -> dict[str, Any]:
        return summary(status, self.allocs, self.health)

    def close(self) -> None:
        """Run the cleanup steps deferred (:class:`herder.CleanupLater`) that are due by now, then
        let go of the data dir. Those not due yet are not waited for: they stay in the state
        database, and the next herder on the same data dir (a ``herder run``, ``herder reap``, an
        agent) runs them when due."""
        try:
            self.client.deferred.finish()
        finally:
            self.client.close()


def reap_command(config: Config) -> list[str]:
    """The command the supervisor runs when a foreground run dies: ``herder reap``
    on the same data dir, configuration and disabled plugins."""
    argv = [sys.executable, "-m", "herder", "reap", "--data-dir", str(config.data_dir)]
    if config.source is not None:
        argv += ["--config", str(config.source)]
    for name in sorted(config.disabled_plugins):
        argv += ["--disable-plugin", name]
    return argv


def reap(config: Config, hooks: Hooks, on_event: Callable[[EventRecord], None] | None = None) -> int:
    """Stop and clean up every allocation that a foreground run left behind when
    it died; returns how many there were."""
    with Client(config, hooks, keep=False, on_event=on_event) as client:
        client.start()  # the services of the orphans' tasks leave the registry with them
        orphans = client.restore(keep=False)
        client.run(orphans)
        for alloc in orphans:
            alloc.stop()
        client.wait(orphans)
    return len(orphans)


# -- the agent ---------------------------------------------------------------


class NotFound(HerderError):
    """No allocation, job or task by that name."""


class Conflict(HerderError):
    """The request cannot be done in the current state (an ambiguous prefix, a task not running, draining)."""


SELF_SERVICE = "herder-client"
SELF_OWNER = "agent"
SELF_CHECK_INTERVAL = 10.0
"""How often the agent passes its own check."""
SELF_CHECK_TTL = 3 * SELF_CHECK_INTERVAL
"""How long the check stays passing without a heartbeat: two may be missed under load."""


def agent_config(config: Config) -> Config:
    """The configuration as the agent uses it: raw_exec is off unless the
    configuration turns it on (``[plugin.raw_exec] enabled = true``), and with
    it the java driver's plain JVMs (:func:`plugin_tables`)."""
    plugin = {name: dict(table) for name, table in config.plugin.items()}
    plugin.setdefault("raw_exec", {}).setdefault("enabled", False)
    return replace(config, plugin=plugin)


def job_status(allocs: Sequence[AllocRunner]) -> str:
    """A job's status is its latest submission's: running while any of its
    allocations runs, else failed, complete or stopped."""
    latest = allocs[-1].job_id
    current = [a.status for a in allocs if a.job_id == latest]
    if any(s in ("pending", "running") for s in current):
        return "running"
    if "failed" in current:
        return "failed"
    return "complete" if all(s == "complete" for s in current) else "stopped"


def logs_dir(alloc: AllocRunner) -> Path:
    """Where the allocation's task logs are: a task's files are named after it, so
    a task name from the allocation (never a path from a request) picks them."""
    return Path(alloc.alloc.dir) / "alloc" / "logs"


@dataclass
class Parent:
    """A job registered with the agent, not run: a periodic job, whose children it
    launches on its schedule, or a parameterized one, whose children are dispatched.
    ``source`` is its canonical document; ``last_launch`` the time of its latest periodic child."""

    job: Job
    source: JobSource
    status: ParentStatus = "running"
    last_launch: float | None = None
    ready: Child | None = field(default=None, repr=False)
    """The child of the next launch, made ahead of its time so that it starts on time."""

    def child(self, at: datetime) -> Child:
        """The child launched at ``at``: the one made ahead if it is that one's."""
        ready, self.ready = self.ready, None
        if ready is not None and ready.job.name == f"{self.job.name}{PERIODIC_SUFFIX}{int(at.timestamp())}":
            return ready
        return periodic_child(json.loads(self.source.text), at)

    def prepare(self, at: datetime | None) -> None:
        """Make the child of the launch at ``at`` (None: none) now, ahead of its time."""
        self.ready = None if at is None else periodic_child(json.loads(self.source.text), at)


class Agent:
    """The client of ``herder agent``: its tasks outlive it (``keep``), and the
    next agent on the same data dir reattaches to them.

    Everything here is synchronous and thread-safe; the HTTP API translates
    requests to these calls, and :class:`NotFound` and :class:`Conflict` to
    its answers. ``on_event`` sees every task event, ``on_health`` every change
    of a service check's status, ``on_collected`` the IDs of the finished
    allocations each garbage collection removed.
    """

    def __init__(self, config: Config, hooks: Hooks, *, on_event: Callable[[EventRecord], None],
                 on_health: Callable[[HealthChange], None] = lambda change: None,
                 on_collected: Callable[[list[str]], None] = lambda ids: None) -> None:
        self.config = config
        self.hooks = hooks
        self.version = __version__
        self.draining = False
        self._submit_lock = threading.Lock()
        self._self_check: str | None = None
        self.client = Client(config, hooks, keep=True, on_event=on_event, on_health=on_health)
        self.gc = GarbageCollector(self.client, on_collected=on_collected)
        self.sampler = StatsSampler()
        self.usage = UsageCollector(self._running_handles, self.sampler, interval=config.telemetry.collection_interval)
        self._parents: dict[str, Parent] = {}
        self.launcher = Launcher(self._launch)
        self._warm_up = threading.Thread(target=self._prepare_launches, name="periodic-warm-up", daemon=True)

    # -- lifetime ------------------------------------------------------------

    def start(self, address: tuple[str, int] | None = None) -> list[AllocRunner]:
        """Start the background work and reattach what the previous agent left
        running; ``address`` (where the API listens) registers the agent as a service."""
        self.client.start()
        restored = self.client.restore(keep=True)
        for alloc in restored:
            log.info("reattaching allocation %s (%s)", alloc.alloc.name, alloc.alloc.id)
        self.client.run(restored)
        self.gc.start()
        self.usage.start()
        self._restore_parents()
        self.launcher.start()
        if address is not None:
            self._register_self(*address)
        return restored

    def begin_drain(self) -> list[AllocRunner]:
        """Start stopping every task gracefully (returns at once); no new job is taken, no child launched."""
        self.draining = True
        allocs = self.client.allocs
        for alloc in allocs:
            alloc.stop()
        return allocs

    def drain(self, timeout: float | None = None) -> bool:
        """Stop every task gracefully; True once all are dead (False on timeout)."""
        return self.client.wait(self.begin_drain(), timeout)

    def close(self) -> None:
        """Let go: running tasks keep running under the supervisor for the next agent."""
        self.launcher.stop()
        self.gc.stop()
        self.usage.stop()
        services = self._services()
        if services is not None:
            services.sync.remove(SELF_OWNER)
            services.sync.flush(2.0)
        self.client.close()

    def _services(self) -> ServicesPlugin | None:
        return next((p for p in self.client.builtins if isinstance(p, ServicesPlugin)), None)

    def _register_self(self, host: str, port: int) -> None:
        services = self._services()
        if services is None:
            return
        advertised = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)
        service_id = f"_herder-agent-{self.config.node_name}-{port}"  # two agents on one host differ by port
        # A TTL check the agent keeps passing itself (heartbeat): a check the registry ran
        # against the API would need the token, and the registry would keep it for anyone to read.
        check = CheckRegistration(id=f"{service_id}-alive", name="herder-client alive", kind="ttl",
                                  ttl=SELF_CHECK_TTL)
        services.sync.set(SELF_OWNER, [ServiceRegistration(
            id=service_id, name=SELF_SERVICE, address=advertised, port=port, tags=("http",), checks=(check,))])
        self._self_check = check.id

    def heartbeat(self) -> None:
        """Pass the agent's own check (once its registration is in the registry): called
        every :data:`SELF_CHECK_INTERVAL` by the loop that serves the API, so an agent
        that died or stopped answering turns critical when the TTL runs out."""
        services = self._services()
        if services is None or self._self_check is None:
            return
        services.sync.flush(SELF_CHECK_INTERVAL)
        running = sum(alloc.status == "running" for alloc in self.client.allocs)
        services.sync.report(self._self_check, CheckStatus(
            PASSING, f"herder agent {self.version} serving, {running} allocation(s) running"))

    # -- jobs ----------------------------------------------------------------

    def submit(self, text: str, fmt: str, variables: dict[str, str], source: str,
               lines: Mapping[str, int] | None = None) -> tuple[str, list[AllocRunner], list[str]]:
        """Run a job: validated, placed and started. The same job submitted
        again changes nothing; a changed job replaces the running one.
        ``source`` and ``lines`` only place messages: no file is read for a job.

        :raises Conflict: the agent is draining.
        :raises JobError: the job is invalid, each problem with its path.
        :raises PlacementError: it cannot be placed; the running version stays.
        """
        if self.draining:
            raise Conflict("the agent is draining: it takes no new job")
        job_source = JobSource(text=text, format=fmt, source=source, variables=variables)
        job = load_submitted(job_source, self.hooks, lines)
        if job.periodic is not None or job.parameterized is not None:
            return self._register(job, job_source)
        self._deregister(job.name)  # a registered job of that name, submitted again as an ordinary one
        with self._submit_lock:
            current = [a for a in self.client.allocs
                       if a.job.name == job.name and a.status in ("pending", "running") and not a.stopping]
            if current and all(a.job_id == job_source.id for a in current):
                return job.name, current, job.warnings
            allocs = self.client.submit(job, job_source)
            for alloc in current:
                alloc.stop()
        if current:
            # The old version's tasks may take their shutdown_delay and kill_timeout to die: the new one
            # starts after them, and no other submission waits for that.
            threading.Thread(target=self._replace, args=(current, allocs), name=f"replace-{job.name}",
                             daemon=True).start()
        else:
            self.client.run(allocs)
        self.gc.wake()  # room for the new allocations, if they make too many
        log.info("job %s submitted: %d allocation(s)", job.name, len(allocs))
        return job.name, allocs, job.warnings

    def dispatch(self, name: str, meta: Mapping[str, str], payload: bytes) -> tuple[str, list[AllocRunner]]:
        """Dispatch the parameterized job ``name`` with ``meta`` and ``payload``: its
        child ``NAME/dispatch-<unix seconds>-<8 hex>`` is submitted as any job is
        and starts running; its name and allocations are returned.

        :raises NotFound: no job ``name``.
        :raises DispatchError: the job is not parameterized, or the dispatch breaks
            its ``parameterized`` block (each problem said); nothing is dispatched.
        :raises Conflict: the agent is draining, or the job is stopped.
        :raises PlacementError: the child cannot be placed.
        """
        parent = self.parent(name)
        if parent is None or parent.job.parameterized is None:
            self.job(name)  # NotFound, unless an ordinary job has that name
            raise DispatchError([f"job {name!r} is not parameterized: only a parameterized job is dispatched"])
        if parent.status == "stopped":
            raise Conflict(f"job {name!r} is stopped: submit it again to dispatch it")
        child, source = dispatch_once(parent.source, meta, payload)
        child_name, allocs, _ = self.submit(source.text, source.format, {}, child.name)
        return child_name, allocs

    def _replace(self, old: list[AllocRunner], new: list[AllocRunner]) -> None:
        """Run ``new`` once every allocation of ``old`` is dead."""
        self.client.wait(old)
        self.client.run(new)

    def jobs(self) -> dict[str, list[AllocRunner]]:
        """Every job with its allocations, the latest submission's first."""
        found: dict[str, list[AllocRunner]] = {}
        for alloc in self.client.allocs:
            found.setdefault(alloc.job.name, []).append(alloc)
        return dict(sorted(found.items()))

    def job(self, name: str) -> list[AllocRunner]:
        """The allocations of job ``name`` (none for a registered job never run itself).

        :raises NotFound: no job ``name``."""
        allocs = self.jobs().get(name, [])
        if not allocs and self.parent(name) is None:
            raise NotFound(f"no job {name!r}")
        return allocs

    def stop_job(self, name: str) -> list[AllocRunner]:
        """Stop every allocation of job ``name`` gracefully (returns at once). A registered
        job stays listed, stopped: a periodic one launches no more and its children are
        stopped (as Nomad); a parameterized one is dispatched no more, and the children
        dispatched run on, each a job of its own.

        :raises NotFound: no job ``name``."""
        parent = self.parent(name)
        if parent is None:
            allocs = self.job(name)
        else:
            with self._submit_lock:
                self.launcher.remove(name)
                if parent.status != "stopped":
                    self.client.store.update_parent(name, status="stopped")
                    parent.status = "stopped"
            allocs = children_of(name, self.client.allocs) if parent.job.periodic is not None else []
            log.info("job %s stopped: no more %s", name,
                     "launches" if parent.job.periodic is not None else "dispatches")
        for alloc in allocs:
            alloc.stop()
        return allocs

    def collect_garbage(self) -> Collected:
        """Collect finished allocations and jobs now, as the periodic collection does (``herder system gc``).

        :raises Conflict: the state database cannot be written now (a full disk): nothing is lost, the
            next collection tries again.
        """
        try:
            return self.gc.collect()
        except StateError as exc:
            raise Conflict(f"cannot collect now: {exc}") from None

    # -- registered jobs: periodic and parameterized ----------------------------

    def parents(self) -> dict[str, Parent]:
        """Every job registered (periodic or parameterized), by name."""
        with self._submit_lock:
            return dict(sorted(self._parents.items()))

    def parent(self, name: str) -> Parent | None:
        with self._submit_lock:
            return self._parents.get(name)

    def children(self, name: str) -> dict[str, list[AllocRunner]]:
        """The children of job ``name`` still known, oldest first, with their allocations."""
        found: dict[str, list[AllocRunner]] = {}
        for alloc in children_of(name, self.client.allocs):
            found.setdefault(alloc.job.name, []).append(alloc)
        return found

    def force(self, name: str) -> tuple[str, list[AllocRunner]]:
        """Launch a child of periodic job ``name`` now, whatever its ``prohibit_overlap``:
        the child's name and allocations.

        :raises NotFound: no periodic job ``name``.
        :raises Conflict: it does not launch (stopped, disabled), or launched this second already.
        :raises PlacementError: the child cannot be placed, or the launch recorded.
        """
        parent = self.parent(name)
        if parent is None:
            raise NotFound(f"no periodic job {name!r}")
        if parent.status == "stopped" or not parent.job.launches:
            raise Conflict(f"periodic job {name!r} does not launch: "
                           + ("it is stopped" if parent.status == "stopped" else "its launches are disabled"))
        launched = self._launch(name, datetime.now(UTC).replace(microsecond=0), forced=True)
        if launched is None:
            raise Conflict(f"periodic job {name!r} launched a child this second already")
        return launched

    def _register(self, job: Job, source: JobSource) -> tuple[str, list[AllocRunner], list[str]]:
        """Register periodic or parameterized ``job``, not run, in place of any job of its name
        registered before; a periodic one follows its schedule (a new one, if it was registered)."""
        _, document = evaluate_job_text(source.text, source.format, source.source, source.variables)
        canonical = JobSource(text=json.dumps(document), format="json", source=source.source)
        with self._submit_lock:
            try:
                self.client.store.put_parent(ParentRecord(name=job.name, source=source.source, text=canonical.text,
                                                          registered_at=time.time()))
            except StateError as exc:
                raise PlacementError(f"the job cannot be registered: {exc}") from exc
            known = self._parents.get(job.name)
            parent = Parent(job, canonical, last_launch=known.last_launch if known else None)
            self._parents[job.name] = parent
            next_launch = self._follow(parent)
        if job.parameterized is not None:
            log.info("job %s registered: parameterized, run when dispatched", job.name)
        else:
            log.info("periodic job %s registered; next launch %s", job.name,
                     next_launch.isoformat() if next_launch else "never")
        return job.name, [], job.warnings

    def _deregister(self, name: str) -> None:
        """Forget registered job ``name`` (nothing if there is none); its children stay."""
        with self._submit_lock:
            if self._parents.pop(name, None) is not None:
                self.launcher.remove(name)
                self.client.store.delete_parent(name)

    def _follow(self, parent: Parent) -> datetime | None:
        """Schedule ``parent``'s next launch, after now and its latest one; its next launch time."""
        if parent.status == "stopped" or not parent.job.launches:
            self.launcher.remove(parent.job.name)
            return None
        assert parent.job.periodic is not None
        last = None if parent.last_launch is None else datetime.fromtimestamp(parent.last_launch, UTC)
        if self._warm_up.ident is None:  # started once, by the first periodic job that launches
            self._warm_up.start()
        next_launch = self.launcher.add(parent.job.name, parent.job.periodic, last)
        parent.prepare(next_launch)
        return next_launch

    def _prepare_launches(self) -> None:
        """Take now what the first launch would wait for: every driver's fingerprint (taken at
        the first placement) and the supervisor (started with the first task), hundreds of
        milliseconds that would make that launch late."""
        self.client.node()
        try:
            self.client.supervisor.connect()
        except HerderError as exc:  # the launch will say it, if it still is so
            log.warning("the supervisor cannot be started: %s", exc)

    def _restore_parents(self) -> None:
        """Register again the jobs of the state database; launches missed meanwhile are not caught up."""
        for record in self.client.store.parents():
            source = JobSource(text=record.text, format="json", source=record.source)
            try:
                job = load_submitted(source, self.hooks)
            except JobError as exc:
                log.warning("registered job %s no longer loads, left out: %s", record.name,
                            "; ".join(exc.errors))
                continue
            parent = Parent(job, source, record.status, record.last_launch)
            with self._submit_lock:
                self._parents[record.name] = parent
                self._follow(parent)

    def _launch(self, name: str, at: datetime, *, forced: bool = False) -> tuple[str, list[AllocRunner]] | None:
        """Launch the child of periodic job ``name`` due at ``at``: its name and allocations;
        None when it is not launched (skipped, stopped, launched already, the agent draining)."""
        with self._submit_lock:
            parent = self._parents.get(name)
            if parent is None or parent.status == "stopped" or self.draining:
                return None
            # The latest launch is stored before its child: killed in between, the agent loses a launch
            # rather than making it twice.
            if parent.last_launch is not None and at.timestamp() <= parent.last_launch:
                return None
            running = overlapped(parent.job, children_of(name, self.client.allocs), forced=forced)
            if running:
                log.info("periodic job %s: launch of %s skipped, %s still running (prohibit_overlap)", name,
                         at.isoformat(), ", ".join(running))
                return None
            child = parent.child(at)
            try:
                self.client.store.update_parent(name, last_launch=at.timestamp())
            except StateError as exc:
                raise PlacementError(f"the launch cannot be recorded: {exc}") from exc
            parent.last_launch = at.timestamp()
            allocs = self.client.submit(child.job, child_source(child, parent.source))
        self.client.run(allocs)
        self.gc.wake()  # one child more: the oldest finished ones beyond the kept may go
        log.info("periodic job %s launched %s%s", name, child.job.name, " (forced)" if forced else "")
        with self._submit_lock:
            parent.prepare(self.launcher.next_launch(name))
        return child.job.name, allocs

    # -- allocations -------------------------------------------------------

    def alloc(self, prefix: str) -> AllocRunner:
        """The allocation whose ID is ``prefix`` or starts with it, as Nomad accepts them.

        :raises NotFound: none does.
        :raises Conflict: several do.
        """
        matches = [a for a in self.client.allocs if a.alloc.id.startswith(prefix)] if prefix else []
        exact = [a for a in matches if a.alloc.id == prefix]
        if exact:
            return exact[0]
        if not matches:
            raise NotFound(f"no allocation with ID prefix {prefix!r}")
        if len(matches) > 1:
            raise Conflict(f"allocation ID prefix {prefix!r} matches {len(matches)} allocations: "
                           + ", ".join(sorted(a.alloc.id for a in matches)))
        return matches[0]

    def health(self, alloc_id: str) -> dict[str, list[dict[str, str]]]:
        """The service checks of an allocation, by task."""
        services = self._services()
        return services.health(alloc_id) if services is not None else {}

    @staticmethod
    def task(alloc: AllocRunner, name: str) -> TaskRunner:
        """:raises NotFound: the allocation has no task ``name``."""
        runner = next((t for t in alloc.tasks if t.name == name), None)
        if runner is None:
            raise NotFound(f"allocation {alloc.alloc.name} has no task {name!r}"
                           f" (tasks: {', '.join(t.name for t in alloc.tasks)})")
        return runner

    def _targets(self, alloc: AllocRunner, task: str | None) -> list[TaskRunner]:
        """Task ``task``, or every task of the allocation, of those running; :class:`Conflict` if none is."""
        runners = [self.task(alloc, task)] if task is not None else list(alloc.tasks)
        running = [r for r in runners if r.status.state == "running" and not r.done]
        if not running:
            raise Conflict(f"task {task} of {alloc.alloc.name} is not running" if task
                           else f"no task of {alloc.alloc.name} is running")
        return running

    def signal(self, alloc: AllocRunner, task: str | None, name: str) -> list[str]:
        """Send signal ``name`` to ``task`` (or every running task); the names of the tasks signalled."""
        try:
            number = parse_signal(name)
            _signal.Signals(number)
        except ValueError:
            raise Conflict(f"unknown signal {name!r}") from None
        targets = self._targets(alloc, task)
        for runner in targets:
            runner.signal(number)
        return [r.name for r in targets]

    def restart(self, alloc: AllocRunner, task: str | None, reason: str) -> list[str]:
        """Start restarting ``task`` (or every running task); the names of the tasks restarting."""
        targets = self._targets(alloc, task)
        for runner in targets:
            threading.Thread(target=runner.restart, args=(reason or "Restart requested through the API",),
                             daemon=True).start()
        return [r.name for r in targets]

    def stats(self, alloc: AllocRunner) -> dict[str, TaskStats | None]:
        """The resource usage of every task of ``alloc``: None for a task not running, or whose driver cannot
        tell. It is the latest the collector read (:mod:`herder.client.stats`), or for a task it has not
        read yet (started since), read now."""
        handles = {runner.name: handle for runner in alloc.tasks
                   if runner.status.state == "running" and (handle := runner.handle) is not None}
        usage = {name: self.usage.latest(handle) for name, handle in handles.items()}
        unread = {name: handle for name, handle in handles.items() if usage[name] is None}
        if unread:
            usage.update(self.sampler.sample(unread))
        return {runner.name: usage.get(runner.name) for runner in alloc.tasks}

    def _running_handles(self) -> Iterator[tuple[str, TaskHandle]]:
        """The handle of every running task, with its driver's name: what the usage collector reads."""
        for alloc in self.client.allocs:
            for runner in alloc.tasks:
                if runner.status.state == "running" and (handle := runner.handle) is not None:
                    yield runner.task.driver, handle

    def exec(self, alloc: AllocRunner, task: str, command: list[str], timeout: float) -> tuple[int, bytes]:
        """Run ``command`` in running task ``task``: its exit code and output."""
        runner = self._targets(alloc, task)[0]
        with _exec_refused(task):
            result = runner.exec(command, timeout)
        return result.exit_code, result.output

    def exec_session(self, alloc: AllocRunner, task: str, command: list[str], tty: bool) -> ExecSession:
        """Start ``command`` interactively in running task ``task`` (on a terminal when ``tty``);
        the caller closes the session."""
        runner = self._targets(alloc, task)[0]
        with _exec_refused(task):
            return runner.exec_session(command, tty)


@contextlib.contextmanager
def _exec_refused(task: str) -> Iterator[None]:
    """Why an exec into ``task`` could not run, as a :class:`Conflict`."""
    try:
        yield
    except RuntimeError as exc:  # the task stopped meanwhile
        raise Conflict(str(exc)) from None
    except HerderError as exc:
        raise Conflict(f"exec in {task}: {exc}") from None
    except OSError as exc:  # the program is not there, or not executable
        raise Conflict(f"exec in {task}: cannot run {exc.filename or 'the command'}: {exc.strerror or exc}") from None
