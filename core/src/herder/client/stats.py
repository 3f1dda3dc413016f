"""Running tasks' resource usage, sampled when someone asks for it.

Nomad's client samples every task every ``collection_interval`` (1 s)
whether anyone looks or not. herder samples only when asked (the API's
stats route, which ``herder alloc status -stats`` and a UI poll about once a
second) and keeps the last sample of each task, so that a task's CPU percent
is over the time since the previous ask: watching costs what Nomad's
collection costs, and nobody watching costs nothing, neither CPU nor a thread.
A first ask, without a recent sample to compare with, takes a second one
:data:`PRIME_INTERVAL` later; a scrape of the agent's metrics asks without
that wait (``prime=False``, :mod:`herder.client.metrics`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import NamedTuple

from herder.objects import TaskHandle, TaskStats

log = logging.getLogger("herder.client")

PRIME_INTERVAL = 0.2
"""Between the two samples of a first ask: long enough for ``/proc``'s 10 ms ticks to say 5 %."""
MAX_SAMPLE_AGE = 30.0
"""A sample older than this is not compared with (nor kept): the percent is of the last while, not of minutes."""


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
