"""The client's sampling of tasks' usage: the CPU percent between two samples, what the sampler keeps,
and the collector's table of the latest samples."""

from __future__ import annotations

import threading
from typing import Any

from herder import DriverNetwork, ExitResult, TaskHandle, TaskStats
from herder.client.stats import MAX_SAMPLE_AGE, PRIME_INTERVAL, StatsSampler, UsageCollector
from tests.support.waiting import TIMEOUT, wait_for


class Clock:
    """A clock the test moves (:meth:`advance`, or the sampler's ``sleep``), and the tasks' CPU with it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []
        self.handles: list[Handle] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        for handle in self.handles:
            handle.cpu_ns += int(seconds * handle.busy * 1e9)

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)


class Handle:
    """A handle whose task is ``busy`` (CPUs) as the clock moves; ``stats()`` returns ``shape`` of it."""

    id = "h"
    network: DriverNetwork | None = None

    def __init__(self, clock: Clock, busy: float = 0.0, shape: str = "stats") -> None:
        self.busy, self.shape, self.cpu_ns = busy, shape, 0
        clock.handles.append(self)

    def stats(self) -> TaskStats | dict[str, Any] | None:
        used = self.cpu_ns
        if self.shape == "raises":
            raise OSError("the driver's bug")
        if self.shape == "dict":
            return {"memory_rss_bytes": 1024, "cpu_total_ns": used, "pid": 5}
        return TaskStats(memory_rss_bytes=1024, cpu_total_ns=used) if self.shape == "stats" else None

    def wait(self, timeout: float | None = None) -> ExitResult | None: ...
    def signal(self, sig: int) -> None: ...
    def kill(self, timeout: float, sig: int | None) -> None: ...
    def state(self) -> dict[str, Any]: return {}


def test_a_first_ask_takes_two_samples_and_later_ones_compare_with_the_last() -> None:
    clock = Clock()
    sampler = StatsSampler(clock, clock.sleep)
    busy, idle = Handle(clock, busy=1.5), Handle(clock, busy=0.0)
    first = sampler.sample({"busy": busy, "idle": idle})
    assert clock.slept == [PRIME_INTERVAL]
    assert first["busy"] is not None and first["busy"].cpu_percent == 150.0
    assert first["idle"] is not None and first["idle"].cpu_percent == 0.0
    busy.busy = 0.25  # from now on: the percent is of the time since the last ask
    clock.advance(1)
    second = sampler.sample({"busy": busy})
    assert clock.slept == [PRIME_INTERVAL], "a second ask waits for nothing"
    assert second["busy"] is not None and second["busy"].cpu_percent is not None
    assert second["busy"].cpu_percent == 25.0


def test_a_sample_too_old_is_not_compared_with() -> None:
    clock = Clock()
    sampler = StatsSampler(clock, clock.sleep)
    handle = Handle(clock, busy=1.0)
    sampler.sample({"t": handle})
    clock.advance(MAX_SAMPLE_AGE + 1)
    sampler.sample({"t": handle})
    assert clock.slept == [PRIME_INTERVAL, PRIME_INTERVAL]


def test_older_handles_and_broken_ones() -> None:
    clock = Clock()
    sampler = StatsSampler(clock, clock.sleep)
    found = sampler.sample({"dict": Handle(clock, 1.0, "dict"), "none": Handle(clock, 1.0, "none"),
                            "raises": Handle(clock, 1.0, "raises")})
    assert found == {"dict": TaskStats(memory_rss_bytes=1024, cpu_total_ns=int(PRIME_INTERVAL * 1e9),
                                       cpu_percent=100.0),
                     "none": None, "raises": None}


class GatedHandle:
    """A handle whose ``stats()`` answers at once, or once ``gate`` is set; it counts its calls."""

    id = "h"
    network: DriverNetwork | None = None

    def __init__(self, rss: int, gate: threading.Event | None = None) -> None:
        self.rss, self.gate, self.calls = rss, gate, 0

    def stats(self) -> TaskStats:
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(TIMEOUT), "never released"
        return TaskStats(memory_rss_bytes=self.rss, cpu_total_ns=1000 * self.calls)

    def wait(self, timeout: float | None = None) -> ExitResult | None: ...
    def signal(self, sig: int) -> None: ...
    def kill(self, timeout: float, sig: int | None) -> None: ...
    def state(self) -> dict[str, Any]: return {}


def test_a_slow_driver_holds_up_no_other_and_is_asked_once_at_a_time() -> None:
    gate = threading.Event()
    slow = GatedHandle(1, gate)
    fast = [GatedHandle(100 + i) for i in range(60)]  # more than a batch
    running: list[tuple[str, TaskHandle]] = [("docker", slow), *(("raw_exec", handle) for handle in fast)]
    collector = UsageCollector(lambda: running, StatsSampler(), interval=3600)  # passes by hand
    try:
        collector.collect()
        firsts = wait_for(lambda: all(collector.latest(h) for h in fast) and [collector.latest(h) for h in fast],
                          what="the fast tasks' usage")
        assert [stats.memory_rss_bytes for stats in firsts] == [h.rss for h in fast]
        assert {stats.cpu_percent for stats in firsts} == {None}  # one sample: no percent yet
        assert collector.latest(slow) is None

        # The next pass asks the fast tasks again, and not the slow one, whose read is still under way.
        collector.collect()
        wait_for(lambda: all(h.calls == 2 for h in fast), what="a second read of the fast tasks")
        wait_for(lambda: all(collector.latest(h).cpu_percent is not None for h in fast),  # type: ignore[union-attr]
                 what="the fast tasks' CPU percent, over two samples")
        assert slow.calls == 1
    finally:
        gate.set()
    assert wait_for(lambda: collector.latest(slow), what="the slow task's usage, once told").memory_rss_bytes == 1
    collector.collect()
    wait_for(lambda: slow.calls == 2, what="the slow task read again at the pass after its read ended")


def test_the_collector_samples_while_watched_and_forgets_tasks_gone() -> None:
    staying, leaving = GatedHandle(1), GatedHandle(2)
    running: list[tuple[str, TaskHandle]] = [("raw_exec", staying), ("raw_exec", leaving)]
    collector = UsageCollector(lambda: list(running), StatsSampler(), interval=0.01)
    collector.start()
    try:
        assert collector.latest(staying) is None  # and now someone watches
        wait_for(lambda: staying.calls >= 3 and leaving.calls >= 3, what="passes every interval")
        del running[1]
        calls, passes = leaving.calls, staying.calls
        wait_for(lambda: staying.calls >= passes + 3, what="more passes")
        assert leaving.calls <= calls + 1  # at most the read under way when it went
        assert collector.latest(leaving) is None and collector.latest(staying) is not None
    finally:
        collector.stop()


def test_nobody_watching_nothing_is_read_and_the_samples_are_forgotten() -> None:
    clock = Clock()
    handle = GatedHandle(1)
    collector = UsageCollector(lambda: [("raw_exec", handle)], StatsSampler(), interval=0.01, watched_for=60,
                               clock=clock)
    collector.start()
    try:
        wait_for(lambda: not collector.sampling, what="the collector's first pass, with nobody watching")
        assert handle.calls == 0
        assert collector.latest(handle) is None  # the first ask starts the sampling
        assert wait_for(lambda: collector.latest(handle), what="a sample").memory_rss_bytes == 1

        clock.advance(61)  # nobody asked since
        wait_for(lambda: not collector.sampling, what="the collector paused")
        calls = handle.calls
        assert collector.latest(handle) is None, "a paused collector keeps no sample to show stale"
        wait_for(lambda: handle.calls >= calls + 3, what="passes again once asked")
    finally:
        collector.stop()
