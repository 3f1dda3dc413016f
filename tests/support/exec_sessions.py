"""Interactive exec sessions into a container: what closing one must end besides the command."""

from __future__ import annotations

import os
from pathlib import Path

from herder.testing import processes
from herder.testing.harness import TaskRun
from tests.support.waiting import TIMEOUT, wait_for

JOB = "sleep 3600"


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def assert_close_ends_the_jobs_of_a_shell(run: TaskRun) -> None:
    """A shell on a terminal starts ``sleep 3600 &``, which job control puts in a process group of its
    own; closing the session must end it too, not only the shell's group. The task runs on."""
    before = processes.marked(run.marker)
    session = run.exec_session(["/bin/sh"], tty=True)
    try:
        session.write(f"{JOB} &\n".encode())

        def job() -> tuple[int, dict[int, int]] | None:
            started = {pid: start for pid, start in processes.marked(run.marker).items() if pid not in before}
            sleeping = [pid for pid in started if _command_line(pid) == JOB]
            return (sleeping[0], started) if sleeping else None

        pid, started = wait_for(job, what=f"`{JOB} &` in the session's shell")
        shells = [other for other in started if other != pid]
        assert shells and all(os.getpgid(pid) != os.getpgid(shell) for shell in shells), \
            "the shell did not put its job in a process group of its own: the test would not tell"
    finally:
        session.close()
    left = processes.wait_gone(started, TIMEOUT)
    assert not left, f"closing the session left its shell's job running: {processes.describe(left)}"
    assert run.wait(0) is None, "the task ended with the exec session"
