"""``herder run``: one job in the foreground, and ``herder reap`` of what a dead one left behind."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from herder.app.periodic import Parent, launch
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.client import Client, JobSource
from herder.client.config import Config
from herder.client.health import HealthChange
from herder.client.periodic import Launcher
from herder.model import Job
from herder.plugins.hooks import Hooks


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


@dataclass
class Reaped:
    """What a foreground run found left behind by herders that died, and stopped."""

    orphans: list[AllocRunner] = field(default_factory=list)
    replaced: list[AllocRunner] = field(default_factory=list)


def _when(time: datetime | None) -> str:
    """A launch time in a message, as the command line writes times."""
    return time.isoformat(timespec="milliseconds").replace("+00:00", "Z") if time else "none"


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
        self._replaced: set[str] = set()  # the allocations rescheduled: their replacements' outcome counts
        # One run ends when its job fails, unless the job file asks for a reschedule.
        self.client.replacements.by_default = False
        self.client.replacements.on_placed = self._rescheduled
        self.reaped = Reaped()
        self._stop_requested = threading.Event()
        self._launches = threading.Lock()  # a periodic job's: its children join allocs in the launcher's thread
        self._parent = Parent(job, source)
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
        self.client.replacements.start()
        if self._stop_requested.is_set():  # asked to stop while placing: nothing runs
            self.stop()
        self.client.run(self.allocs)
        if self.job.periodic is not None:
            self._follow_schedule()
        # Short waits, so that signal handlers run promptly in the main thread; a failed allocation
        # whose replacement is due is waited for too.
        while True:
            everything = self._everything()
            # A replacement is added to the run before it stops being pending: the run is over once
            # nothing is pending and no allocation joined while those waited for ended.
            if (self.client.wait(everything, timeout=0.5) and not self.client.replacements.pending(self.job.name)
                    and len(self._everything()) == len(everything)):
                break
            self._stop_requested.wait(0.1)
        with self._launches:
            if any(a.failed for a in self.allocs if a.alloc.id not in self._replaced):
                return "failed"
        return "stopped" if self._stop_requested.is_set() else "complete"

    def _rescheduled(self, previous: AllocRunner, alloc: AllocRunner) -> None:
        """A failed allocation was replaced: the run follows the replacement."""
        with self._launches:
            self._replaced.add(previous.alloc.id)
            self.allocs.append(alloc)
            stopped = self._stop_requested.is_set()
        self._on_message(f"Allocation {previous.alloc.name} failed: rescheduled as {alloc.alloc.id}")
        if stopped:
            alloc.stop()

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
                         f"{_when(first)}")
        self._launcher.start()
        while not self._stop_requested.wait(0.5):  # short waits, so that signal handlers run promptly
            pass
        self._launcher.stop()

    def _launch(self, name: str, at: datetime) -> None:
        with self._launches:
            if self._stop_requested.is_set():
                return
            launched = launch(self.client, self._parent, at, self.allocs)
            if launched.child is None:
                self._on_message(f"Job {name}: launch at {_when(at)} skipped, {', '.join(launched.overlapping)} "
                                 "still running (prohibit_overlap)")
                return
            self.allocs += launched.allocs
            self.client.run(launched.allocs)
        self._on_message(f"Job {name}: launched {launched.child.name}; next launch at "
                         f"{_when(self._launcher.next_launch(name))}")

    def stop(self) -> None:
        """Stop every task gracefully, and a periodic job's launches; safe to call from a signal handler's thread."""
        with self._launches:
            self._stop_requested.set()
            allocs = list(self.allocs)
        self.client.replacements.cancel(self.job.name)
        for alloc in allocs:
            alloc.stop()

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
