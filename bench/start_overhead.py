"""Start overhead: batch raw_exec tasks through herder against bare Popen calls, and how it scales.

    python bench/start_overhead.py [--count 200] [--sizes 10,100,1000] [--rounds 5] [--dir DIR] [--no-record]

Both sides run ``/bin/true`` N times in parallel threads and wait for every
process to exit. herder's side is one job with ``count = N`` through the
in-process client, as ``herder run`` drives it: placement (directories,
ports), the state database, the processes started through the supervisor,
hooks, events and cleanup included. Each herder run is a fresh Python process
(so its peak RSS is the job's alone); the timing starts once herder is
imported and its plugins loaded, as the bare side's starts with Python
running. The data dir is made in DIR (``bench/.data``: the disk a real data
dir is on). The sides take turns, ROUNDS rounds of each size, medians
reported.

(a) COUNT tasks: herder's time over the bare one (target ≤ 3); beside it, the
    floor of what herder must write for them: the nine directories of each
    allocation and task, and its two log files, made in DIR with bare
    ``os.mkdir``/``os.open`` calls, the cost of the disk alone;
(b) SIZES: the overhead per task, (herder - bare) / N, at each size
    (target: at the largest size within 1.2 times that at the next one),
    and herder's peak RSS per added task (target: ≤ 100 KiB).

The result replaces the "Start overhead" section of ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from jobs import all_ms, load, median_ms, sleepers, until_ended, until_started
from results import where, write_section

BENCH_DIR = Path(__file__).resolve().parent
TASK_DIRS = ("alloc", "alloc/data", "alloc/logs", "alloc/tmp", "t", "t/local", "t/secrets", "t/tmp")

JOB = """
job "bench" {{
  type = "batch"
  group "g" {{
    count = {count}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/true"
      }}
    }}
  }}
}}
"""


def bare_popen(count: int) -> float:
    """COUNT ``/bin/true`` processes, each started and waited for in its own thread."""

    def one() -> None:
        subprocess.Popen(["/bin/true"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True).wait()

    threads = [threading.Thread(target=one) for _ in range(count)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def files_floor(count: int, where: Path) -> float:
    """The directories and log files of COUNT one-task allocations, made in ``where`` with bare calls."""
    with tempfile.TemporaryDirectory(dir=where) as root:
        start = time.perf_counter()
        os.mkdir(Path(root, "allocs"))
        for index in range(count):
            alloc = Path(root, "allocs", str(index))
            os.mkdir(alloc, 0o711)
            for name in TASK_DIRS:
                os.mkdir(alloc / name, 0o755)
            for name in ("t.stdout.0", "t.stderr.0"):
                os.close(os.open(alloc / "alloc/logs" / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        return time.perf_counter() - start


class ThreadPeak:
    """The most threads this process had at once: counted at every thread's start, so no peak is
    missed between two samples."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._start = threading.Thread.start
        peak = self

        def start(thread: threading.Thread) -> None:
            peak._start(thread)
            peak.peak = max(peak.peak, threading.active_count())

        threading.Thread.start = start  # type: ignore[method-assign]


def child(count: int, where: Path, sleeping: bool) -> None:
    """One job of ``count = COUNT`` in this process: print its time, this process's peak RSS and its
    peak thread count; with ``sleeping``, the tasks sleep and the time is until all have started, with
    the threads counted then too (the job is then stopped)."""
    from herder.plugins.hooks import Hooks
    from herder.plugins.loader import load_plugins

    hooks = Hooks(load_plugins())
    threads = ThreadPeak()
    running = 0

    def all_running() -> None:
        nonlocal running
        running = threading.active_count()

    if sleeping:
        elapsed = until_started(hooks, sleepers(count), count, where, on_started=all_running)
    else:
        elapsed = until_ended(hooks, JOB.format(count=count), where)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": elapsed, "peak_rss": peak, "peak_threads": threads.peak,
                      "running_threads": running}))


def through_herder(count: int, where: Path, sleeping: bool = False) -> dict[str, float]:
    """A job of ``count = COUNT`` in a fresh process (see :func:`child`): ``seconds``, ``peak_rss``,
    ``peak_threads`` and ``running_threads``."""
    command = [sys.executable, __file__, "--child", str(count), "--dir", str(where)]
    out = subprocess.run([*command, "--sleeping"] if sleeping else command, check=True, capture_output=True,
                         text=True).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=BENCH_DIR / ".data", help="where the data dirs are made")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--sleeping", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    if args.child is not None:
        child(args.child, args.dir, args.sleeping)
        return
    scale = sorted(int(size) for size in args.sizes.split(","))
    sizes = sorted({args.count, *scale})
    load_before = load()
    through_herder(10, args.dir)  # warm up the page cache for herder's imports
    bare: dict[int, list[float]] = {size: [] for size in sizes}
    herder: dict[int, list[float]] = {size: [] for size in sizes}
    peak: dict[int, list[float]] = {size: [] for size in sizes}
    threads: dict[int, list[float]] = {size: [] for size in sizes}
    floor: list[float] = []
    sleeping: list[dict[str, float]] = []
    for _ in range(args.rounds):
        floor.append(files_floor(args.count, args.dir))
        for size in sizes:
            bare[size].append(bare_popen(size))
            result = through_herder(size, args.dir)
            herder[size].append(result["seconds"])
            peak[size].append(result["peak_rss"])
            threads[size].append(result["peak_threads"])
        sleeping.append(through_herder(args.count, args.dir, sleeping=True))
    load_after = load()

    def med(values: list[float]) -> float:
        return statistics.median(values)

    ratio = med(herder[args.count]) / med(bare[args.count])
    overhead = {size: (med(herder[size]) - med(bare[size])) / size for size in sizes}
    mid, top = scale[-2], scale[-1]
    flat = overhead[top] / overhead[mid]
    per_added = (med(peak[top]) - med(peak[scale[0]])) / (top - scale[0])
    # The cost of each task beyond the previous size's: without the fixed costs (the supervisor's
    # start, the state database) that (herder - bare) / N spreads over the tasks.
    marginal = {size: "" for size in sizes}
    for before, size in itertools.pairwise(sizes):
        marginal[size] = f"{(med(herder[size]) - med(herder[before])) / (size - before) * 1e3:.2f} ms"
    rows = [
        f"| {size} | {median_ms(bare[size])} | {median_ms(herder[size])} | "
        f"{med(herder[size]) / med(bare[size]):.2f} | {overhead[size] * 1e3:.2f} ms | {marginal[size]} | "
        f"{med(peak[size]) / 2**20:.1f} MiB | {med(threads[size]):.0f} |" for size in sizes]
    body = "\n".join([
        f"`/bin/true` N times: bare `subprocess.Popen` in N threads against a job of `count = N` in herder "
        f"(a fresh process per run, placement to the last cleanup). Medians of {args.rounds} rounds, the sides "
        f"taking turns, the data dirs in `{where(args.dir)}`. Load average (1, 5, 15 min) before: {load_before}; "
        f"after: {load_after}.",
        "",
        "| N | bare | herder | herder / bare | overhead per task | herder per task beyond the previous N "
        "| herder's peak RSS | herder's peak threads |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"- {args.count} tasks, herder / bare: **{ratio:.2f}** (target ≤ 3: {'met' if ratio <= 3 else 'NOT met'}).",
        f"- The floor of the disk: the {args.count} tasks' directories and log files alone (9 `mkdir` and 2 "
        f"`open(O_CREAT)` each) take {median_ms(floor)} (all rounds: {all_ms(floor)} ms); bare `Popen` plus "
        f"them: {(med(floor) + med(bare[args.count])) / med(bare[args.count]):.2f} times bare `Popen`.",
        f"- Overhead per task at {top} over that at {mid}: **{flat:.2f}** "
        f"(target ≤ 1.2: {'met' if flat <= 1.2 else 'NOT met'}).",
        f"- herder's peak RSS per added task, {scale[0]} to {top} tasks: **{per_added / 1024:.0f} KiB** "
        f"(target ≤ 100 KiB: {'met' if per_added <= 100 * 1024 else 'NOT met'}).",
        f"- {args.count} tasks sleeping: all started in {median_ms([r['seconds'] for r in sleeping])}, with "
        f"**{med([r['running_threads'] for r in sleeping]):.0f}** threads in herder's process then (peak "
        f"{med([r['peak_threads'] for r in sleeping]):.0f}; all rounds: "
        f"{', '.join(str(round(r['running_threads'])) for r in sleeping)}).",
        "",
        "All rounds (ms): " + "; ".join(
            f"{size}: bare {all_ms(bare[size])}, herder {all_ms(herder[size])}" for size in sizes) + ".",
    ])
    print(body)
    if not args.no_record:
        write_section("Start overhead", f"python bench/start_overhead.py --rounds {args.rounds}", body)


if __name__ == "__main__":
    main()
