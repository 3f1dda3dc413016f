"""The runners of a client hold a bounded number of threads, however many tasks run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from herder.client.runtime import POOL_SIZE
from tests.support.running import start_job
from tests.support.waiting import wait_for

TASKS = 100

SLEEPERS = f"""
job "j" {{
  group "g" {{
    count = {TASKS}
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

OTHERS = 8
"""Threads of a client besides the runners' workers (the state committer, the supervisor connection's
reader, the timer, the fingerprints, deferred cleanups, the services' sync) with room to spare: far
fewer than one per task."""


class ThreadPeak:
    """The most threads at once in this process, counted at every thread's start (no peak missed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.peak = threading.active_count()
        start = threading.Thread.start

        def counting_start(thread: threading.Thread) -> None:
            start(thread)
            self.peak = max(self.peak, threading.active_count())

        monkeypatch.setattr(threading.Thread, "start", counting_start)


def test_a_hundred_sleeping_tasks_run_on_a_bounded_number_of_threads(
        data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = threading.active_count()
    peak = ThreadPeak(monkeypatch)
    run, wait = start_job(SLEEPERS, data_dir)
    wait_for(lambda: run.types().count("Started") == TASKS, 300, lambda: f"{TASKS} tasks started: {run.types()}")
    running, started_peak = threading.enumerate(), peak.peak
    run.runner.stop()
    assert wait(300) == "stopped"
    assert run.types().count("Killed") == TASKS

    bound = before + 1 + POOL_SIZE + OTHERS  # the job's own thread (start_job's), the pool, the rest
    assert len(running) <= bound, sorted(thread.name for thread in running)
    assert started_peak <= bound, f"peak {started_peak} threads while starting, over {bound}"
    # No thread is a task's or an allocation's: none waits for a raw_exec task's exit.
    assert not [thread.name for thread in running if thread.name.startswith(("task-", "alloc-", "wait-"))]


STUBBORN = """
job "j" {{
  group "g" {{
    count = {count}
    task "t" {{
      driver       = "raw_exec"
      kill_timeout = "20s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "trap '' INT TERM; while :; do sleep 1; done"]
      }}
    }}
  }}
}}
"""


def test_the_kills_of_a_stop_begin_together_though_each_takes_its_kill_timeout(data_dir: Path) -> None:
    # More tasks than workers, each holding its kill for its whole kill_timeout (20 s): were the
    # kills to wait for a free worker, or for the pool to grow (a worker every 2 s), the last would
    # begin 10 s and more after the first. They begin within half a second of one another (the
    # bound here is generous, for a loaded machine).
    count = POOL_SIZE + 6
    run, wait = start_job(STUBBORN.format(count=count), data_dir)
    wait_for(lambda: run.types().count("Started") == count, 120, lambda: f"{count} tasks started: {run.types()}")
    run.runner.stop()
    assert wait(300) == "stopped"
    assert run.types().count("Killed") == count
    killing = sorted(record.event.time for record in run.events if record.event.type == "Killing")
    assert len(killing) == count
    assert (killing[-1] - killing[0]).total_seconds() < 10, killing
