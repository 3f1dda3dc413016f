"""The agent's state: one long-lived client, the jobs submitted to it, and what the API shows.

Everything here is synchronous and thread-safe; :mod:`herder.agent.api`
translates HTTP to these calls.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal as _signal
import threading
from collections import deque
from importlib.metadata import version
from pathlib import Path
from typing import Any

from herder import app
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.client import Client, JobSource
from herder.client.config import Config
from herder.client.health import HealthChange
from herder.client.hooks.services import ServicesPlugin
from herder.client.task_runner import TaskRunner
from herder.errors import HerderError
from herder.objects import parse_signal
from herder.plugins.hooks import Hooks
from herder.services import PASSING, CheckRegistration, CheckStatus, ServiceRegistration

log = logging.getLogger("herder.agent")

EVENT_BUFFER = 10_000
"""How many recent events the event stream can replay."""

SELF_SERVICE = "herder-client"
SELF_OWNER = "agent"
SELF_CHECK_INTERVAL = 10.0
"""How often the agent passes its own check."""
SELF_CHECK_TTL = 3 * SELF_CHECK_INTERVAL
"""How long the check stays passing without a heartbeat: two may be missed under load."""


class NotFound(HerderError):
    """No allocation, job or task by that name."""


class Conflict(HerderError):
    """The request cannot be done in the current state (an ambiguous prefix, a task not running)."""


def agent_config(config: Config) -> Config:
    """The configuration as the agent uses it: raw_exec is off unless the
    configuration turns it on (``[plugin.raw_exec] enabled = true``), and with
    it the java driver's plain JVMs (:func:`herder.app.plugin_tables`)."""
    plugin = {name: dict(table) for name, table in config.plugin.items()}
    plugin.setdefault("raw_exec", {}).setdefault("enabled", False)
    return dataclasses.replace(config, plugin=plugin)


class Agent:
    """The client of ``herder agent``: its tasks outlive it (``keep``), and the
    next agent on the same data dir reattaches to them."""

    def __init__(self, config: Config, hooks: Hooks) -> None:
        self.config = config
        self.hooks = hooks
        self.version = version("herder")
        self.draining = False
        self._events: deque[tuple[int, dict[str, Any]]] = deque(maxlen=EVENT_BUFFER)
        self._seq = 0
        self._events_changed = threading.Condition()
        self._submit_lock = threading.Lock()
        self._self_check: str | None = None
        self.client = Client(config, hooks, keep=True, on_event=self._on_event, on_health=self._on_health)

    # -- lifetime ------------------------------------------------------------

    def start(self, address: str | None = None) -> list[AllocRunner]:
        """Start the background work and reattach what the previous agent left
        running; ``address`` (``host:port``) registers the agent as a service."""
        self.client.start()
        restored = self.client.restore(keep=True)
        for alloc in restored:
            log.info("reattaching allocation %s (%s)", alloc.alloc.name, alloc.alloc.id)
        self.client.run(restored)
        if address is not None:
            self._register_self(address)
        return restored

    def begin_drain(self) -> list[AllocRunner]:
        """Start stopping every task gracefully (returns at once); no new job is taken."""
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
        services = self._services()
        if services is not None:
            services.sync.remove(SELF_OWNER)
            services.sync.flush(2.0)
        self.client.close()

    def _services(self) -> ServicesPlugin | None:
        return next((p for p in self.client.builtins if isinstance(p, ServicesPlugin)), None)

    def _register_self(self, address: str) -> None:
        services = self._services()
        if services is None:
            return
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        advertised = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
        service_id = f"_herder-agent-{self.config.node_name}-{port}"  # two agents on one host differ by port
        # A TTL check the agent keeps passing itself (heartbeat): a check the registry ran
        # against the API would need the token, and the registry would keep it for anyone to read.
        check = CheckRegistration(id=f"{service_id}-alive", name="herder-client alive", kind="ttl",
                                  ttl=SELF_CHECK_TTL)
        services.sync.set(SELF_OWNER, [ServiceRegistration(
            id=service_id, name=SELF_SERVICE, address=advertised, port=int(port),
            tags=("http",), checks=(check,))])
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

    # -- events --------------------------------------------------------------

    def _on_event(self, record: EventRecord) -> None:
        event = app.event_json(record)
        log.info("%s %s: %s %s", record.alloc_name, record.task, event["type"], event["message"])
        with self._events_changed:
            self._seq += 1
            self._events.append((self._seq, event))
            self._events_changed.notify_all()

    def _on_health(self, change: HealthChange) -> None:
        log.info("%s %s: check %s of service %s is %s", change.alloc_name, change.task, change.check,
                 change.service, change.status)

    def events_after(self, seq: int, alloc_id: str | None = None) -> tuple[int, list[dict[str, Any]]]:
        """The events after number ``seq`` (of one allocation), and the last number."""
        with self._events_changed:
            last = self._seq
            found = [(n, e) for n, e in self._events if n > seq and (alloc_id is None or e["alloc_id"] == alloc_id)]
        return last, [e | {"index": n} for n, e in found]

    def wait_events(self, seq: int, timeout: float) -> None:
        """Block until there is an event after ``seq``, or ``timeout`` passed."""
        with self._events_changed:
            self._events_changed.wait_for(lambda: self._seq > seq, timeout)

    # -- jobs ----------------------------------------------------------------

    def submit(self, text: str, fmt: str, variables: dict[str, str], source: str,
               lines: dict[str, int] | None = None) -> tuple[str, list[AllocRunner], list[str]]:
        """Run a job: validated, placed and started. The same job submitted
        again changes nothing; a changed job replaces the running one.
        ``source`` and ``lines`` only place messages: no file is read for a job.

        :raises JobError: the job is invalid, each problem with its path.
        :raises PlacementError: it cannot be placed; the running version stays.
        """
        if self.draining:
            raise Conflict("the agent is draining: it takes no new job")
        job_source = JobSource(text=text, format=fmt, source=source, variables=variables)
        job = app.load_submitted(job_source, self.hooks, lines)
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
        log.info("job %s submitted: %d allocation(s)", job.name, len(allocs))
        return job.name, allocs, job.warnings

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
        allocs = self.jobs().get(name)
        if not allocs:
            raise NotFound(f"no job {name!r}")
        return allocs

    def stop_job(self, name: str) -> list[AllocRunner]:
        allocs = self.job(name)
        for alloc in allocs:
            alloc.stop()
        return allocs

    # -- allocations -------------------------------------------------------

    def alloc(self, prefix: str) -> AllocRunner:
        """The allocation whose ID is ``prefix`` or starts with it, as Nomad accepts them."""
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
        services = self._services()
        return services.health(alloc_id) if services is not None else {}

    @staticmethod
    def task(alloc: AllocRunner, name: str) -> TaskRunner:
        runner = next((t for t in alloc.tasks if t.name == name), None)
        if runner is None:
            raise NotFound(f"allocation {alloc.alloc.name} has no task {name!r}"
                           f" (tasks: {', '.join(t.name for t in alloc.tasks)})")
        return runner

    def _targets(self, alloc: AllocRunner, task: str | None) -> list[TaskRunner]:
        runners = [self.task(alloc, task)] if task is not None else list(alloc.tasks)
        running = [r for r in runners if r.status.state == "running" and not r.done]
        if not running:
            raise Conflict(f"task {task} of {alloc.alloc.name} is not running" if task
                           else f"no task of {alloc.alloc.name} is running")
        return running

    def signal(self, alloc: AllocRunner, task: str | None, name: str) -> list[str]:
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
        targets = self._targets(alloc, task)
        for runner in targets:
            threading.Thread(target=runner.restart, args=(reason or "Restart requested through the API",),
                             daemon=True).start()
        return [r.name for r in targets]

    def exec(self, alloc: AllocRunner, task: str, command: list[str], timeout: float) -> tuple[int, bytes]:
        runner = self._targets(alloc, task)[0]
        try:
            result = runner.exec(command, timeout)
        except RuntimeError as exc:  # the task stopped meanwhile
            raise Conflict(str(exc)) from None
        except HerderError as exc:
            raise Conflict(f"exec in {task}: {exc}") from None
        return result.exit_code, result.output


def logs_dir(alloc: AllocRunner) -> Path:
    """Where the allocation's task logs are: a task's files are named after it, so
    a task name from the allocation (never a path from a request) picks them."""
    return Path(alloc.alloc.dir) / "alloc" / "logs"


def sse(event: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"id: {event['index']}\nevent: task-event\ndata: {json.dumps(event)}\n\n"
