"""Running a job through herder in a benchmark, the way ``herder run`` does, and measuring the machine."""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from herder.app import ForegroundRun
from herder.client.alloc_runner import EventRecord
from herder.client.client import JobSource
from herder.client.config import Config, PortsConfig
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks


@dataclass
class JobRun:
    """A job placed by :func:`placed_job`: its runner, its data dir and when the timing started."""

    runner: ForegroundRun
    data_dir: Path
    started: float

    def elapsed(self) -> float:
        """Seconds since the timing started, just before the runner was made."""
        return time.perf_counter() - self.started


@contextmanager
def placed_job(hooks: Hooks, text: str, on_event: Callable[[EventRecord], None] = lambda record: None,
               parent: Path | None = None) -> Iterator[JobRun]:
    """The HCL job ``text`` placed by a :class:`ForegroundRun` on a temporary data dir (in ``parent``, else
    the system's temporary directory), as ``herder run`` places it; closed (and the data dir removed) on
    leaving. The timing starts before the runner is made, so it counts opening the state database and
    placement."""
    with tempfile.TemporaryDirectory(dir=parent) as data_dir:
        config = Config(data_dir=Path(data_dir), ports=PortsConfig(min=2000, max=12000))
        job = load_job_text(text, "hcl", "bench.hcl")
        started = time.perf_counter()
        runner = ForegroundRun(config, hooks, job, JobSource(text=text, format="hcl", source="bench.hcl"),
                               on_event=on_event)
        try:
            runner.place()
            yield JobRun(runner, Path(data_dir), started)
        finally:
            runner.close()


def until_ended(hooks: Hooks, text: str, parent: Path | None = None) -> float:
    """Seconds from placing the HCL job ``text`` until every allocation is over (cleanup included);
    the job must complete. The data dir is made in ``parent`` (see :func:`placed_job`)."""
    with placed_job(hooks, text, parent=parent) as run:
        status = run.runner.run()
        elapsed = run.elapsed()
    if status != "complete":
        raise SystemExit(f"the benchmark job did not complete: {status}")
    return elapsed


def until_started(hooks: Hooks, text: str, count: int, parent: Path | None = None,
                  on_started: Callable[[], None] = lambda: None) -> float:
    """Seconds from placing the HCL job ``text`` until ``count`` of its tasks have started;
    then ``on_started`` is called, and the job is stopped and cleaned up (not timed). The
    data dir is made in ``parent`` (see :func:`placed_job`)."""
    started = 0
    all_started = threading.Event()
    lock = threading.Lock()

    def on_event(record: EventRecord) -> None:
        nonlocal started
        if record.event.type == "Started":
            with lock:
                started += 1
                if started == count:
                    all_started.set()

    with placed_job(hooks, text, on_event, parent) as run:
        thread = threading.Thread(target=run.runner.run, daemon=True)
        thread.start()
        ok = all_started.wait(120)
        elapsed = run.elapsed()
        if ok:
            on_started()
        run.runner.stop()
        thread.join(120)
    if not ok:
        raise SystemExit(f"only {started} of {count} tasks started")
    return elapsed


SLEEPERS = """
job "{name}" {{
  group "g" {{
    count = {count}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "sleep"
        args    = ["3600"]
      }}
    }}
  }}
}}
"""


def sleepers(count: int, name: str = "sleepers") -> str:
    """A job of ``count`` allocations, each a raw_exec task sleeping for an hour."""
    return SLEEPERS.format(name=name, count=count)


def rss(pid: int) -> int:
    """The resident set size of ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def pss(pid: int) -> int:
    """The proportional set size of ``pid`` (its shared pages divided among their users), in bytes."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no Pss for pid {pid}")


def load() -> str:
    """The machine's load averages over 1, 5 and 15 minutes, as ``uptime`` shows them."""
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def median_ms(values: Sequence[float]) -> str:
    """The median of ``values`` (seconds), in whole milliseconds."""
    return f"{statistics.median(values) * 1e3:.0f} ms"


def all_ms(values: Sequence[float]) -> str:
    """Every one of ``values`` (seconds), in whole milliseconds, for the record."""
    return ", ".join(f"{value * 1e3:.0f}" for value in values)
