"""Running a job through herder in a benchmark, the way ``herder run`` does."""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from herder.app import ForegroundRun
from herder.client.alloc_runner import EventRecord
from herder.client.client import JobSource
from herder.client.config import Config, PortsConfig
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks


def until_started(hooks: Hooks, text: str, count: int) -> float:
    """Seconds from placing the HCL job ``text`` until ``count`` of its tasks have started;
    then the job is stopped and cleaned up (not timed)."""
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

    with tempfile.TemporaryDirectory() as data_dir:
        config = Config(data_dir=Path(data_dir), ports=PortsConfig(min=2000, max=12000))
        job = load_job_text(text, "hcl", "bench.hcl")
        start = time.perf_counter()
        runner = ForegroundRun(config, hooks, job, JobSource(text=text, format="hcl", source="bench.hcl"),
                               on_event=on_event)
        try:
            runner.place()
            thread = threading.Thread(target=runner.run, daemon=True)
            thread.start()
            ok = all_started.wait(120)
            elapsed = time.perf_counter() - start
            runner.stop()
            thread.join(120)
        finally:
            runner.close()
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
