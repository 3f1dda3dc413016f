"""herder.sdk.process: ending a session, as a container runtime's ``exec`` starts one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from herder.sdk import kill_session
from tests.support.waiting import wait_for

LEADER = """
import os, subprocess, sys
child = subprocess.Popen(["sleep", "3600"], process_group=0)
with open(sys.argv[1] + ".tmp", "w") as pid:
    pid.write(str(child.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
child.wait()
"""
"""A session leader whose child has a process group of its own (as a shell's job control makes one)."""


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_kill_session_ends_every_process_group_of_the_session(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    leader = subprocess.Popen([sys.executable, "-c", LEADER, str(pid_file)], start_new_session=True)
    try:
        wait_for(pid_file.exists, what="the leader's child")
        child = int(pid_file.read_text())
        # Killing the leader's process group alone would leave the child.
        assert os.getpgid(child) != leader.pid and os.getsid(child) == leader.pid
        assert kill_session(leader.pid, signal.SIGKILL)
        assert leader.wait(30) == -signal.SIGKILL
        wait_for(lambda: not _alive(child), what="the child in a process group of its own to end")
    finally:
        kill_session(leader.pid, signal.SIGKILL)
        leader.wait()


def test_kill_session_of_no_process_says_so() -> None:
    assert not kill_session(2**22 + 1)  # above the kernel's largest pid: no session has it


def test_kill_session_spares_a_session_whose_leader_number_was_reused() -> None:
    # The caller's leader ended and was reaped: a live process with its number leads another session.
    other = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    try:
        assert not kill_session(other.pid, signal.SIGKILL, leader_gone=True)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
