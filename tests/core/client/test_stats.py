"""The client's sampling of tasks' usage: the CPU percent between two asks, and what it keeps."""

from __future__ import annotations

from typing import Any

from herder import DriverNetwork, ExitResult, TaskStats
from herder.client.stats import MAX_SAMPLE_AGE, PRIME_INTERVAL, StatsSampler


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
