"""The use cases every front end shares.

The command line and the agent only translate between their medium and
these: reading a job, describing drivers and plugins, running a job in the
foreground, reaping what a dead foreground run left behind, and the JSON
shapes of events and summaries.

The Nomad integration, a front end too, reaches herder only through
``herder``, ``herder.sdk`` and this module: what it needs beside the use cases
is re-exported here (the ``import X as X`` lines).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.client import Client, JobSource
from herder.client.config import Config
from herder.client.health import HealthChange
from herder.client.lifecycle import TaskLifecycle as TaskLifecycle
from herder.client.lifecycle import config_errors as config_errors
from herder.errors import JobError
from herder.jobspec import JobFiles, evaluate_job_text, load_job_text, validate_task_configs
from herder.jobspec.formats import format_of, read_text, read_var_file
from herder.model import Job
from herder.model import Resources as Resources
from herder.objects import parse_signal as parse_signal
from herder.plugins.hooks import Hooks
from herder.plugins.hooks import Participants as Participants
from herder.plugins.loader import load_plugins
from herder.supervisor import Supervisor as Supervisor

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
                 on_health: Callable[[HealthChange], None] = lambda change: None, keep: bool = False) -> None:
        self.job = job
        self.source = source
        self.health = HealthLog()

        def health_changed(change: HealthChange) -> None:
            self.health.record(change)
            on_health(change)

        self.client = Client(config, hooks, keep=keep, on_event=on_event, on_health=health_changed,
                             on_lost=None if keep else {"argv": reap_command(config), "env": dict(os.environ)})
        self.allocs: list[AllocRunner] = []
        self.reaped = Reaped()
        self._stop_requested = threading.Event()

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
        self.allocs = adopted or client.submit(self.job, self.source)

    def run(self) -> str:
        """Run every allocation to the end; returns "complete", "failed" or "stopped"."""
        self.client.start()
        if self._stop_requested.is_set():  # asked to stop while placing: nothing runs
            self.stop()
        self.client.run(self.allocs)
        while not self.client.wait(self.allocs + self.reaped.orphans + self.reaped.replaced, timeout=0.5):
            pass  # short waits, so that signal handlers run promptly in the main thread
        if any(a.failed for a in self.allocs):
            return "failed"
        return "stopped" if self._stop_requested.is_set() else "complete"

    def stop(self) -> None:
        """Stop every task gracefully; safe to call from a signal handler's thread."""
        self._stop_requested.set()
        for alloc in self.allocs:
            alloc.stop()

    def summary(self, status: str) -> dict[str, Any]:
        return summary(status, self.allocs, self.health)

    def close(self) -> None:
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
