"""Running tasks' resource usage: sampled every collection interval, read from the latest samples.

As Nomad's client does every ``telemetry.collection_interval`` (1 s), the
agent's :class:`UsageCollector` reads every running task's usage on its own
schedule, while someone watches, and keeps the latest sample of each; the
stats route, the web UI and a metrics scrape read that table. An answer
never waits on a driver, its CPU percent is over the last interval, and a
scrape costs what writing it costs, whatever the number of tasks
(``bench/metrics.py``, ``bench/stats.py``). Nobody watching costs nothing.

:class:`StatsSampler` reads and works out the CPU percent between a handle's
samples. Asked about a task without an earlier sample (one the collector has
not read yet), it takes a second one :data:`PRIME_INTERVAL` later.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import NamedTuple

from herder.background import Background
from herder.client.runtime import WorkerPool, shared_runtime
from herder.objects import TaskHandle, TaskStats

log = logging.getLogger("herder.client")

PRIME_INTERVAL = 0.2
"""Between the two samples of a first ask: long enough for ``/proc``'s 10 ms ticks to say 5 %."""
MAX_SAMPLE_AGE = 30.0
"""A sample older than this is not compared with (nor kept): the percent is of the last while, not of minutes."""
STATS_WORKERS = 4
"""Threads that read the tasks' usage: reads mostly wait on the kernel or a container engine."""
STATS_BATCH = 10
"""Tasks of one driver read one after the other by a worker: a few milliseconds of work."""
BATCH_SPACING = 0.02
"""Between the starts of two batches of a pass (less when a pass has more batches than fit in half
the interval)."""
WATCHED_FOR = 300.0
"""Seconds after the last ask for a sample that the collector goes on sampling: longer than a
Prometheus scrape interval (1 min by default)."""


class Sample(NamedTuple):
    at: float
    """When it was read (``time.monotonic()``)."""
    cpu_total_ns: int


class StatsSampler:
    """Reads tasks' :class:`TaskStats` through their handles and works out their CPU percent.

    Samples are kept by handle: a restarted task has a new handle, whose
    counters start again from zero.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._clock = clock
        self._sleep = sleep
        # By the handle's id(); the handle is kept with its sample so that its id is not reused meanwhile.
        self._last: dict[int, tuple[TaskHandle, Sample]] = {}
        self._lock = threading.Lock()

    def sample(self, handles: Mapping[str, TaskHandle], *, prime: bool = True) -> dict[str, TaskStats | None]:
        """The usage of each task of ``handles`` (by name): None for one whose driver cannot tell.
        Without ``prime``, a task without a recent sample is not sampled twice: its CPU percent is
        then unknown (None), and the call never waits."""
        now = self._read(handles)
        with self._lock:
            self._forget_older_than(self._clock() - MAX_SAMPLE_AGE)
            unprimed = [name for name, (_, stats) in now.items()
                        if prime and stats is not None and stats.cpu_total_ns is not None
                        and stats.cpu_percent is None and id(handles[name]) not in self._last]
        if unprimed:
            for name in unprimed:
                self._remember(handles[name], *now[name])
            self._sleep(PRIME_INTERVAL)
            now.update(self._read({name: handles[name] for name in unprimed}))
        return {name: self._with_percent(handles[name], at, stats) for name, (at, stats) in now.items()}

    def _read(self, handles: Mapping[str, TaskHandle]) -> dict[str, tuple[float, TaskStats | None]]:
        read = {}
        for name, handle in handles.items():
            try:
                stats = TaskStats.of(handle.stats())
            except Exception:  # a driver's bug: that task's figures are unknown, the others still shown
                log.exception("stats() of task %s (%r) failed", name, handle)
                stats = None
            read[name] = (self._clock(), stats)
        return read

    def _with_percent(self, handle: TaskHandle, at: float, stats: TaskStats | None) -> TaskStats | None:
        """``stats`` with its CPU percent since the handle's previous sample, which it then replaces."""
        previous = self._remember(handle, at, stats)
        if stats is None or stats.cpu_total_ns is None or stats.cpu_percent is not None or previous is None:
            return stats
        elapsed, used = at - previous.at, stats.cpu_total_ns - previous.cpu_total_ns
        if elapsed <= 0 or used < 0:
            return stats
        return replace(stats, cpu_percent=round(used / (elapsed * 1e9) * 100, 1))

    def _remember(self, handle: TaskHandle, at: float, stats: TaskStats | None) -> Sample | None:
        """Keep ``stats`` as the handle's last sample (if it counts CPU time); the one before, if any."""
        if stats is None or stats.cpu_total_ns is None:
            return None
        with self._lock:
            previous = self._last.get(id(handle))
            self._last[id(handle)] = (handle, Sample(at, stats.cpu_total_ns))
        return None if previous is None else previous[1]

    def _forget_older_than(self, oldest: float) -> None:
        """Drop the samples of tasks nobody asked about lately (and of handles since gone)."""
        self._last = {key: kept for key, kept in self._last.items() if kept[1].at >= oldest}


Running = Callable[[], Iterable[tuple[str, TaskHandle]]]
"""The handles of the running tasks, each with its driver's name."""


class UsageCollector:
    """Samples the usage of every task ``running`` names each ``interval`` seconds while someone
    watches, and keeps the latest samples.

    Someone watches while :meth:`latest` was asked within ``watched_for``
    seconds (:data:`WATCHED_FOR`, longer than any scrape interval): an agent
    nobody looks at reads nothing, and forgets its samples rather than show
    stale ones later. The first ask after such a pause finds no sample and
    starts the sampling again.

    The reads go to a few workers in batches of at most :data:`STATS_BATCH`
    tasks of one driver, spread over the first half of the interval: each
    batch is a few milliseconds of work, between which the agent serves its
    requests (a handoff per task would cost more than most reads, a few files
    of ``/proc``). A task whose read is still under way is not asked again, so
    a slow driver (a container engine) is asked at its own pace, and its
    slowness neither piles up reads nor holds up another driver's tasks. A
    task no longer running leaves the table at the next pass.
    """

    def __init__(self, running: Running, sampler: StatsSampler, *, interval: float,
                 watched_for: float = WATCHED_FOR, workers: int = STATS_WORKERS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._running = running
        self._sampler = sampler
        self._interval = interval
        self._watched_for = watched_for
        self._clock = clock
        self._timer = shared_runtime().timer
        self._pool = WorkerPool(workers, self._timer, name="herder-stats")
        # Both by the handle's id(), the handle kept so that its id is not reused meanwhile.
        self._latest: dict[int, tuple[TaskHandle, TaskStats]] = {}
        self._reading: set[int] = set()
        self._running_now: set[int] = set()  # as of the last pass: a read ending later keeps no task gone
        self._asked = -math.inf
        self._paused = False
        self._lock = threading.Lock()
        self._background = Background("stats", self._step)

    def start(self) -> None:
        self._background.start()

    def stop(self) -> None:
        self._background.stop()

    @property
    def sampling(self) -> bool:
        """False once nobody has asked for ``watched_for`` seconds, until the next ask."""
        with self._lock:
            return not self._paused

    def latest(self, handle: TaskHandle) -> TaskStats | None:
        """The latest usage read of the task of ``handle``; None before its first read, or if its driver
        cannot tell. Asking counts as watching."""
        with self._lock:
            self._asked = self._clock()
            kept = self._latest.get(id(handle))
            resume, self._paused = self._paused, False
        if resume:
            self._background.wake()
        return None if kept is None else kept[1]

    def collect(self) -> None:
        """One pass: forget the tasks gone, and ask the drivers about every running task not being read."""
        running = {id(handle): (driver, handle) for driver, handle in self._running()}
        by_driver: dict[str, list[TaskHandle]] = {}
        with self._lock:
            self._running_now = set(running)
            self._latest = {key: kept for key, kept in self._latest.items() if key in running}
            for key, (driver, handle) in running.items():
                if key not in self._reading:
                    self._reading.add(key)
                    by_driver.setdefault(driver, []).append(handle)
        batches = [handles[start:start + STATS_BATCH]
                   for handles in by_driver.values() for start in range(0, len(handles), STATS_BATCH)]
        if not batches:
            return
        spacing = min(BATCH_SPACING, self._interval / 2 / len(batches))
        for i, batch in enumerate(batches):
            read = functools.partial(self._pool.submit, functools.partial(self._read, batch))
            if i:
                self._timer.call_later(i * spacing, read)
            else:
                read()

    def _step(self) -> float | None:
        with self._lock:
            if self._clock() - self._asked > self._watched_for:
                self._paused = True
                self._latest.clear()
            paused = self._paused
        if paused:
            return None  # until :meth:`latest` is asked
        self.collect()
        return self._interval

    def _read(self, batch: list[TaskHandle]) -> None:
        sampled: dict[str, TaskStats | None] = {}
        try:
            # No second sample for a first CPU percent: the next pass gives it.
            sampled = self._sampler.sample({str(i): handle for i, handle in enumerate(batch)}, prime=False)
        finally:  # whatever happened, these tasks are asked again at the next pass
            with self._lock:
                for i, handle in enumerate(batch):
                    self._reading.discard(id(handle))
                    if (stats := sampled.get(str(i))) is not None and id(handle) in self._running_now:
                        self._latest[id(handle)] = (handle, stats)
