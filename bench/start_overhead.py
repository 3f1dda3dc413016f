"""Start overhead: 200 batch raw_exec tasks through herder against 200 bare Popen calls.

    python bench/start_overhead.py [--count 200] [--rounds 3]

Both sides run ``/bin/true`` COUNT times in parallel threads and wait for every
process to exit. herder's side is one job with ``count = COUNT`` through the
in-process client, as ``herder run`` drives it: placement (directories,
ports), the state database, the processes started through the supervisor,
hooks, events and cleanup included. The result replaces the "Start overhead" section of
``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from herder.app import ForegroundRun
from herder.client.client import JobSource
from herder.client.config import Config, PortsConfig
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results import write_section

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


def through_herder(count: int, hooks: Hooks) -> float:
    """One job with ``count = COUNT`` through the runner, from placement to the last cleanup."""
    with tempfile.TemporaryDirectory() as data_dir:
        config = Config(data_dir=Path(data_dir), ports=PortsConfig(min=2000, max=12000))
        text = JOB.format(count=count)
        job = load_job_text(text, "hcl", "bench.hcl")
        start = time.perf_counter()
        runner = ForegroundRun(config, hooks, job, JobSource(text=text, format="hcl", source="bench.hcl"),
                               on_event=lambda record: None)
        try:
            runner.place()
            status = runner.run()
        finally:
            runner.close()
        elapsed = time.perf_counter() - start
    if status != "complete":
        raise SystemExit(f"the benchmark job did not complete: {status}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    hooks = Hooks(load_plugins())
    through_herder(10, hooks)  # warm up imports and caches
    baseline = min(bare_popen(args.count) for _ in range(args.rounds))
    herder = min(through_herder(args.count, hooks) for _ in range(args.rounds))
    per_task_ms = (herder - baseline) / args.count * 1000
    ratio = herder / baseline
    verdict = "met" if per_task_ms <= 5 else "NOT met"
    ratio_verdict = "met" if ratio <= 4 else "NOT met"
    table = "\n".join([
        f"| what | time (best of {args.rounds}) |",
        "|---|---|",
        f"| {args.count} runs of `/bin/true`, bare `subprocess.Popen` in threads | {baseline * 1e3:.0f} ms |",
        f"| {args.count} runs of `/bin/true`, a job of `count = {args.count}` in herder | {herder * 1e3:.0f} ms |",
        f"| ratio herder / bare | {ratio:.2f} (target ≤ 4: {ratio_verdict}) |",
        f"| herder overhead per task | {per_task_ms:.2f} ms (target ≤ 5 ms: {verdict}) |",
    ])
    print(table)
    write_section("Start overhead", "python bench/start_overhead.py", table)


if __name__ == "__main__":
    main()
