"""``herder.sdk.run_capped``: what ``herder_task_exec`` implementations run commands with."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from herder import EXEC_OUTPUT_LIMIT
from herder.errors import DriverError
from herder.sdk import TaskUser, run_capped
from tests.support.waiting import TIMEOUT


def test_output_and_exit_code(tmp_path: Path) -> None:
    result = run_capped(["sh", "-c", "echo out; echo err >&2; exit 3"], env=None, cwd=tmp_path, timeout=5)
    assert result.exit_code == 3
    assert b"out\n" in result.output and b"err\n" in result.output


def test_output_is_capped(tmp_path: Path) -> None:
    result = run_capped(["head", "-c", "200000", "/dev/zero"], env=None, cwd=tmp_path, timeout=5)
    assert len(result.output) == EXEC_OUTPUT_LIMIT


def test_a_timeout_is_raised_at_once_even_if_an_escaped_process_holds_the_output(tmp_path: Path) -> None:
    """A process in a session of its own (as ``runc exec`` starts) outlives the kill of the
    command's group and keeps the pipe open: the timeout must not wait for it."""
    pid_file = tmp_path / "escaped"
    script = f"setsid sleep 300 & echo $! > {pid_file}; sleep 300"
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            run_capped(["sh", "-c", script], env=None, cwd=tmp_path, timeout=0.5)
        assert time.monotonic() - started < TIMEOUT  # not the escaped process's 300 s
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_a_command_runs_as_the_user_with_its_groups_and_home(tmp_path: Path) -> None:
    nobody = TaskUser.lookup("nobody")
    env = {"PATH": os.environ["PATH"], "HOME": "/root", **nobody.environment()}
    result = run_capped(["sh", "-c", 'echo "$(id -u) $(id -g) $(id -G) $HOME $USER"'], env=env, cwd=tmp_path,
                        timeout=5, user=nobody)
    assert result.exit_code == 0, result.output
    groups = " ".join(str(gid) for gid in nobody.groups)
    assert result.output.decode().split() == [str(nobody.uid), str(nobody.gid), *groups.split(), nobody.home,
                                              "nobody"]


def test_an_unknown_user_is_a_driver_error() -> None:
    with pytest.raises(DriverError, match="user 'no-such-user-here' does not exist on this host"):
        TaskUser.lookup("no-such-user-here")
