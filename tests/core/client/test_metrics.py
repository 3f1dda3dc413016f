"""Reading tasks' usage for a scrape: a slow driver leaves its tasks out, and its reads do not pile up."""

from __future__ import annotations

import threading
from typing import Any

from herder import DriverNetwork, ExitResult, TaskStats
from herder.client.metrics import StatsReader
from herder.client.stats import StatsSampler
from tests.support.waiting import TIMEOUT, wait_for


class Handle:
    """A handle whose ``stats()`` answers at once, or once ``gate`` is set; it counts its calls."""

    id = "h"
    network: DriverNetwork | None = None

    def __init__(self, rss: int, gate: threading.Event | None = None) -> None:
        self.rss, self.gate, self.calls = rss, gate, 0

    def stats(self) -> TaskStats:
        self.calls += 1
        if self.gate is not None:
            assert self.gate.wait(TIMEOUT), "never released"
        return TaskStats(memory_rss_bytes=self.rss, cpu_total_ns=1000)

    def wait(self, timeout: float | None = None) -> ExitResult | None: ...
    def signal(self, sig: int) -> None: ...
    def kill(self, timeout: float, sig: int | None) -> None: ...
    def state(self) -> dict[str, Any]: return {}


def test_a_slow_driver_leaves_its_tasks_out_and_is_asked_once_at_a_time() -> None:
    gate = threading.Event()
    slow = Handle(1, gate)
    fast = {f"fast{i}": ("raw_exec", Handle(100 + i)) for i in range(60)}  # more than a batch
    reader = StatsReader(StatsSampler(), timeout=0.5)
    try:
        read = reader.read({**fast, "slow": ("docker", slow)})
        assert {key: stats.memory_rss_bytes for key, stats in read.items()} == \
            {key: handle.rss for key, (_, handle) in fast.items()}
        assert {key: stats.cpu_percent for key, stats in read.items()} == dict.fromkeys(fast)  # no second sample

        # The next scrape waits for the read under way rather than asking the slow driver again.
        assert "slow" not in reader.read({"slow": ("docker", slow)})
        assert slow.calls == 1
    finally:
        gate.set()
    wait_for(lambda: reader.read({"slow": ("docker", slow)}).get("slow"), what="the slow task's usage, once told")
    assert all(handle.calls == 1 for _, handle in fast.values())
