"""Short-lived commands and process groups, for drivers.

:func:`run_capped` runs a short command with a timeout and capped output, as
``herder_task_exec`` needs; :func:`kill_session` ends what a container
runtime's ``exec`` started. A task's own long-lived process is a
:class:`herder.sdk.SupervisedProcess`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from herder.errors import DriverError
from herder.objects import EXEC_OUTPUT_LIMIT, ExecResult, ExitResult
from herder.sdk.users import TaskUser
from herder.supervisor.netns import NamespaceError
from herder.supervisor.netns import entered as entered_namespace
from herder.supervisor.proctree import process_table


def exit_result(returncode: int) -> ExitResult:
    """A Popen return code as an ExitResult (negative means killed by a signal)."""
    if returncode < 0:
        return ExitResult(exit_code=128 - returncode, signal=-returncode)
    return ExitResult(exit_code=returncode)


def kill_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a process group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def run_capped(argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: Path | None,
               timeout: float, user: TaskUser | None = None, netns: Path | None = None) -> ExecResult:
    """Run a command to completion, stdout and stderr together, capped at 64 KiB; as ``user``
    (its uid, groups) when given, in the network namespace at ``netns`` when given.

    :raises TimeoutError: when it outlives ``timeout`` (its process group is killed).
    :raises DriverError: it cannot run as ``user``, or in ``netns``.
    """
    identity = user.popen_arguments() if user is not None else {}
    try:
        with entered_namespace(netns):
            proc = subprocess.Popen(list(argv), env=dict(env) if env is not None else None, cwd=cwd,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True, **identity)
    except NamespaceError as err:
        raise DriverError(str(err)) from None
    assert proc.stdout is not None
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(proc.stdout, chunks), daemon=True)
    reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    else:
        timed_out = False
    # Whatever the command left running in its group would hold the output pipe open.
    kill_group(proc.pid, signal.SIGKILL)
    proc.wait()
    if timed_out:
        # Not waiting for the output: a process in a session of its own (what ``runc exec``
        # starts, say) may hold the pipe; the reader finishes, and closes it, on its own.
        raise TimeoutError(f"command timed out after {timeout:g}s")
    reader.join(5.0)
    return ExecResult(exit_code=exit_result(proc.returncode).exit_code, output=b"".join(chunks))


def _drain(stream: IO[bytes], chunks: list[bytes]) -> None:
    """Read ``stream`` to its end, keeping only the first 64 KiB, then close it."""
    kept = 0
    with stream:
        while data := stream.read(65536):
            if kept < EXEC_OUTPUT_LIMIT:
                chunks.append(data[: EXEC_OUTPUT_LIMIT - kept])
                kept += len(chunks[-1])


SESSION_KILL_ROUNDS = 100
"""How many times :func:`kill_session` looks again for members a racing ``fork`` added."""


def kill_session(sid: int, sig: int = signal.SIGKILL, *, leader_gone: bool = False) -> bool:
    """Send ``sig`` to every process of session ``sid`` (the host's pids); False when it had none.

    What a container runtime's ``exec`` starts is a session leader of its own
    (runc calls ``setsid``), and what it starts may be in other process groups
    (a shell with job control puts each job in one), so ending the command
    means ending its session, which no single system call does. With SIGKILL
    the session is looked at again until it is empty, so that a child forked
    while it was walked is not left behind.

    A session's number stays reserved while any member lives, but once they
    are all gone a new process may get it and start a session of its own.
    ``leader_gone``: the caller knows the leader has ended and was reaped;
    then a process numbered ``sid`` is another one, its session another
    session, and nothing is signalled.
    """
    if leader_gone and os.path.exists(f"/proc/{sid}"):
        return False
    found = False
    for _ in range(SESSION_KILL_ROUNDS):
        members = _session_members(sid)
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        found = found or bool(members)
        if not members or sig != signal.SIGKILL:
            break
    return found


def _session_members(sid: int) -> list[int]:
    """The processes whose session is ``sid``, but for zombies (killed already)."""
    return [pid for pid, entry in process_table().items() if entry.sid == sid and not entry.zombie]
