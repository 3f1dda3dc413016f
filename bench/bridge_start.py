"""Bridge start: a 10-allocation job in bridge mode against the same job in host mode.

    python bench/bridge_start.py [--count 10] [--rounds 5] [--dir DIR]

Each side is one job with ``count = COUNT`` allocations of one raw_exec task
sleeping, through the in-process runner, timed from placement until every
task has its ``Started`` event. The bridge side's allocations each get a
network namespace attached by the real CNI plugins (Nomad's bridge
configuration list, a port mapped each); the time its namespaces
(``ip netns add``) and its CNI ADDs took is summed apart, over the
allocations (which start in parallel, so the sums may exceed the wall time).
The sides take turns, ROUNDS rounds, medians reported; every job is stopped
and its namespaces removed between rounds, outside the timing. Needs root and
the CNI plugins. The result replaces the "Bridge start" section of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder.client.network import cni, namespace
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import all_ms, load, median_ms, until_started
from results import where, write_section

JOB = """
job "bench-bridge-{suffix}" {{
  group "g" {{
    count = {count}
    network {{
      mode = "{mode}"
      port "http" {{ to = 8080 }}
    }}
    task "t" {{
      driver       = "raw_exec"
      kill_timeout = "1s"
      config {{
        command = "sleep"
        args    = ["300"]
      }}
    }}
  }}
}}
"""


class Timed:
    """Seconds spent in a function, summed over its calls from every thread."""

    def __init__(self) -> None:
        self.total = 0.0
        self._lock = threading.Lock()

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                with self._lock:
                    self.total += time.perf_counter() - start
        return timed

    def take(self) -> float:
        with self._lock:
            total, self.total = self.total, 0.0
        return total


def run(hooks: Hooks, mode: str, count: int, where: Path) -> float:
    return until_started(hooks, JOB.format(suffix=uuid.uuid4().hex[:8], count=count, mode=mode), count, where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent / ".data",
                        help="where herder's data dirs are made")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    namespaces, adds = Timed(), Timed()
    namespace.create = namespaces.wrap(namespace.create)  # type: ignore[method-assign]
    cni.Cni.add = adds.wrap(cni.Cni.add)  # type: ignore[method-assign]
    hooks = Hooks(load_plugins())
    load_before = load()
    run(hooks, "bridge", 2, args.dir)  # warm up imports, the supervisor, the bridge and the plugins' pages
    run(hooks, "host", 2, args.dir)
    namespaces.take(), adds.take()
    host, bridge, in_namespaces, in_adds = [], [], [], []
    for _ in range(args.rounds):  # interleaved, so both sides see the same machine
        host.append(run(hooks, "host", args.count, args.dir))
        namespaces.take(), adds.take()
        bridge.append(run(hooks, "bridge", args.count, args.dir))
        in_namespaces.append(namespaces.take())
        in_adds.append(adds.take())
    ratio = statistics.median(bridge) / statistics.median(host)
    verdict = "met" if ratio <= 1.5 else "NOT met"
    table = "\n".join([
        f"| what | time (median of {args.rounds}) |",
        "|---|---|",
        f"| {args.count} allocations in host mode, placement to the last `Started` | {median_ms(host)} |",
        f"| {args.count} allocations in bridge mode, placement to the last `Started` | {median_ms(bridge)} |",
        f"| of which, summed over the allocations: `ip netns add` | {median_ms(in_namespaces)} |",
        f"| of which, summed over the allocations: CNI ADD (loopback, bridge, firewall, portmap) "
        f"| {median_ms(in_adds)} |",
        f"| ratio bridge / host | {ratio:.2f} (target ≤ 1.5: {verdict}) |",
        "",
        f"All rounds (ms, taking turns): host {all_ms(host)}; bridge {all_ms(bridge)}; namespaces "
        f"{all_ms(in_namespaces)}; CNI ADD {all_ms(in_adds)}. herder's data dirs in `{where(args.dir)}`. "
        f"Load average (1, 5, 15 min) before: {load_before}; after: {load()}.",
    ])
    print(table)
    write_section("Bridge start", f"python bench/bridge_start.py --rounds {args.rounds}", table)


if __name__ == "__main__":
    main()
