"""A soak of short batch jobs through the agent's API: memory and disk level off once GC runs.

    python bench/gc_soak.py [--jobs 10000] [--concurrency 4] [--every 100] [--no-gc] [--no-record]

An agent on a temporary data dir, with the default ``[client]`` GC settings
(``gc_max_allocs = 50``, ``gc_interval = "1m"``), is given JOBS batch jobs of
one raw_exec task (``true``), each a job of its own, CONCURRENCY at a time:
each worker submits a job (``POST /v1/jobs``) and waits until its task is
dead before the next. Every EVERY jobs the agent's RSS, the data dir's size
(every file's allocated blocks, ``state.db`` included) and the number of
allocation directories are sampled.

Target: once the first collection ran, both curves level off: a slope (least
squares over the samples from the first collection on) of at most 1 KiB per
job. With ``--no-gc`` the same run with collection out of reach
(``gc_max_allocs`` and ``job_gc_threshold`` beyond the run), the baseline.

The result replaces the "GC soak" section of ``bench/RESULTS.md`` (with
``--no-gc``, its baseline part).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from jobs import rss  # noqa: E402
from results import RESULTS, write_section  # noqa: E402

from tests.support.agent import AgentProcess  # noqa: E402

JOB = """
job "soak-{number}" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "true"
      }}
    }}
  }}
}}
"""

NO_GC = '[client]\ngc_max_allocs = 100000000\njob_gc_threshold = "1000h"\n'


def disk_size(path: Path) -> int:
    """Bytes allocated to every file under ``path``."""
    total = 0
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            with contextlib.suppress(FileNotFoundError):  # collected meanwhile
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


def alloc_dirs(data_dir: Path) -> int:
    allocs = data_dir / "allocs"
    return len(os.listdir(allocs)) if allocs.exists() else 0


def run_job(http: httpx.Client, number: int) -> None:
    """Submit job ``number`` and wait until its task is dead (or its allocation collected)."""
    response = http.post("/v1/jobs", json={"text": JOB.format(number=number), "format": "hcl"})
    response.raise_for_status()
    alloc_id = response.json()["allocations"][0]["id"]
    while True:
        status = http.get(f"/v1/allocations/{alloc_id}")
        if status.status_code == 404 or status.json()["tasks"]["t"]["state"] == "dead":
            return
        time.sleep(0.01)


def soak(jobs: int, concurrency: int, every: int, gc: bool) -> tuple[list[tuple[int, int, int, int]], float]:
    """Run the soak; the samples ``(jobs done, RSS, data dir bytes, allocation dirs)`` and the seconds it took."""
    with tempfile.TemporaryDirectory(prefix="gc-soak-") as tmp:
        agent = AgentProcess(Path(tmp), extra="" if gc else NO_GC).start()
        assert agent.proc is not None
        samples: list[tuple[int, int, int, int]] = []
        done = 0
        next_number = 0
        lock = threading.Lock()

        def sample() -> None:
            assert agent.proc is not None
            samples.append((done, rss(agent.proc.pid), disk_size(agent.data_dir), alloc_dirs(agent.data_dir)))

        def worker() -> None:
            nonlocal done, next_number
            with agent.http() as http:
                while True:
                    with lock:
                        if next_number >= jobs:
                            return
                        number = next_number
                        next_number += 1
                    run_job(http, number)
                    with lock:
                        done += 1
                        if done % every == 0:
                            sample()
                            print(f"{samples[-1][0]} jobs: RSS {samples[-1][1] / 2**20:.1f} MiB, data dir "
                                  f"{samples[-1][2] / 2**20:.1f} MiB, {samples[-1][3]} alloc dirs", flush=True)

        try:
            sample()
            started = time.monotonic()
            threads = [threading.Thread(target=worker) for _ in range(concurrency)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
        finally:
            agent.shutdown()
        return samples, elapsed


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares slope of ``(x, y)`` points."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var if var else 0.0


def curve(samples: list[tuple[int, int, int, int]], column: int, points: int = 11) -> str:
    """About ``points`` evenly spaced samples of one column, in MiB."""
    step = max(1, (len(samples) - 1) // (points - 1))
    picked = samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else [])
    return ", ".join(f"{s[0]}: {s[column] / 2**20:.1f}" for s in picked)


def summary(samples: list[tuple[int, int, int, int]], elapsed: float, gc: bool) -> str:
    jobs = samples[-1][0]
    first_gc = next((i for i, s in enumerate(samples) if 0 < s[3] < s[0]), None)
    lines = [f"- {jobs} jobs in {elapsed:.0f} s ({jobs / elapsed:.1f} jobs/s), "
             f"alloc dirs at the end: {samples[-1][3]}",
             f"- RSS (MiB) by jobs done: {curve(samples, 1)}",
             f"- data dir (MiB) by jobs done: {curve(samples, 2)}"]
    if gc and first_gc is not None and len(samples) - first_gc >= 3:
        after = samples[first_gc:]
        half = samples[len(samples) // 2:]
        lines.append(f"- first collection seen at {samples[first_gc][0]} jobs; slope from there: RSS "
                     f"{slope([(s[0], s[1]) for s in after]) / 1024:.2f} KiB/job, data dir "
                     f"{slope([(s[0], s[2]) for s in after]) / 1024:.2f} KiB/job; over the last half: RSS "
                     f"{slope([(s[0], s[1]) for s in half]) / 1024:.2f} KiB/job, data dir "
                     f"{slope([(s[0], s[2]) for s in half]) / 1024:.2f} KiB/job")
    else:
        lines.append(f"- slope over the whole run: RSS {slope([(s[0], s[1]) for s in samples]) / 1024:.2f} "
                     f"KiB/job, data dir {slope([(s[0], s[2]) for s in samples]) / 1024:.2f} KiB/job")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--every", type=int, default=100, help="sample every N jobs done")
    parser.add_argument("--no-gc", action="store_true", help="the baseline: collection out of reach")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    samples, elapsed = soak(args.jobs, args.concurrency, args.every, not args.no_gc)
    text = summary(samples, elapsed, not args.no_gc)
    print(text)
    if args.no_record:
        return
    command = f"python bench/gc_soak.py --jobs {args.jobs} --concurrency {args.concurrency}" + \
        (" --no-gc" if args.no_gc else "")
    title = "GC soak, baseline without collection" if args.no_gc else "GC soak"
    write_section(title, command, text)
    print(f"written to {RESULTS}")


if __name__ == "__main__":
    main()
