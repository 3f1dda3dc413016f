"""Attack: a raw_exec task leaves a process behind by leaving its process group.

A task that calls ``setsid()`` in a child, or double-forks into a new
session, is out of reach of a signal to its process group. Stopping the task
must end every process it started all the same: the graceful signal reaches
the whole tree, and what survives ``kill_timeout`` is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.supervisor.proctree import CGROUP_ROOT, cgroup_prefix
from tests.support.agent import AgentProcess
from tests.support.foreground import HerderRun, task_dirs
from tests.support.processes import alive
from tests.support.waiting import wait_for

# The leader forks a child that starts a session of its own, records the signal that stops it, and exits.
# The leader exits on that signal once the child has recorded it (or at once if it never will): when the
# leader is gone the supervisor kills whatever is left, and the child would have no time to write.
SETSID = """
import os, signal, sys, time
here = os.environ["NOMAD_TASK_DIR"]
def record(name, text):
    with open(os.path.join(here, name + ".tmp"), "w") as file:
        file.write(text)
    os.rename(os.path.join(here, name + ".tmp"), os.path.join(here, name))
child = os.fork()
if child == 0:
    os.setsid()
    def stopped(sig, frame):
        record("escapee.signal", str(sig))
        os._exit(0)
    signal.signal(signal.SIGTERM, stopped)
    record("escapee.pid", str(os.getpid()))
    while True:
        time.sleep(1000)
def stop(sig, frame):
    os.waitpid(child, 0)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
record("leader.pid", str(os.getpid()))
while True:
    time.sleep(1000)
"""

# The leader double-forks a grandchild into a new session; it ignores every graceful signal.
DOUBLE_FORK = """
import os, signal, time
here = os.environ["NOMAD_TASK_DIR"]
def record(name, text):
    with open(os.path.join(here, name + ".tmp"), "w") as file:
        file.write(text)
    os.rename(os.path.join(here, name + ".tmp"), os.path.join(here, name))
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        record("escapee.pid", str(os.getpid()))
        while True:
            time.sleep(1000)
    os._exit(0)
os.waitpid(child, 0)
record("leader.pid", str(os.getpid()))
while True:
    time.sleep(1000)
"""

JOB = """
job "escape" {{
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "t" {{
      driver       = "raw_exec"
      kill_signal  = "SIGTERM"
      kill_timeout = "2s"
      config {{
        command = "{python}"
        args    = ["{script}"]
      }}
    }}
  }}
}}
"""

SCRIPTS = {"setsid": SETSID, "double-fork": DOUBLE_FORK}


def job_text(tmp_path: Path, attack: str) -> str:
    script = tmp_path / f"{attack}.py"
    script.write_text(SCRIPTS[attack])
    return JOB.format(python=sys.executable, script=script)


def recorded_pid(data_dir: Path, name: str) -> int:
    [task_dir] = task_dirs(data_dir, "t")
    return int(wait_for(lambda: _read(task_dir / "local" / name), what=f"the task wrote {name}"))


def _read(path: Path) -> str:
    """The file's text; empty while it is not there."""
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


@contextlib.contextmanager
def killed_afterwards(pids: list[int]) -> Iterator[None]:
    """Whatever the outcome, no process of the attack outlives the test."""
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def assert_tree_gone(data_dir: Path, attack: str, leader: int, escapee: int) -> None:
    wait_for(lambda: not alive(leader), 30, "the task's leader is gone")
    wait_for(lambda: not alive(escapee), 30, f"the {attack} escapee is gone")
    if attack == "setsid":
        # The graceful signal reached the escapee too: it did not take the SIGKILL after kill_timeout.
        [task_dir] = task_dirs(data_dir, "t")
        assert _read(task_dir / "local" / "escapee.signal") == str(int(signal.SIGTERM))
    pattern = f"{cgroup_prefix(data_dir)}*"
    wait_for(lambda: not [*CGROUP_ROOT.glob(pattern), *CGROUP_ROOT.glob(f"*/{pattern}")], 30, "no cgroup left")


@pytest.mark.parametrize("attack", SCRIPTS)
def test_herder_run_interrupted_leaves_no_process_of_the_task(tmp_path: Path, attack: str) -> None:
    data_dir, job = tmp_path / "data", tmp_path / "job.hcl"
    job.write_text(job_text(tmp_path, attack))
    run = HerderRun(job, data_dir)
    try:
        run.wait_for("Started")
        leader, escapee = recorded_pid(data_dir, "leader.pid"), recorded_pid(data_dir, "escapee.pid")
        with killed_afterwards([leader, escapee]):
            assert alive(escapee) and os.getsid(escapee) != os.getsid(leader)
            run.interrupt()
            assert_tree_gone(data_dir, attack, leader, escapee)
    finally:
        run.finish(kill=True)


@pytest.mark.parametrize("attack", SCRIPTS)
def test_an_agent_job_stop_leaves_no_process_of_the_task(tmp_path: Path, attack: str) -> None:
    agent = AgentProcess(tmp_path).start()
    try:
        alloc_id = agent.submit(job_text(tmp_path, attack))["allocations"][0]["id"]
        agent.wait_task(alloc_id, "t", "running")
        leader = recorded_pid(agent.data_dir, "leader.pid")
        escapee = recorded_pid(agent.data_dir, "escapee.pid")
        with killed_afterwards([leader, escapee]):
            assert alive(escapee) and os.getsid(escapee) != os.getsid(leader)
            stop = agent.cli("job", "stop", "escape")
            assert stop.returncode == 0, stop.stderr
            agent.wait_task(alloc_id, "t", "dead")
            assert_tree_gone(agent.data_dir, attack, leader, escapee)
    finally:
        agent.shutdown()
