"""Processes in their own process group: the building block of process drivers.

:class:`ProcessHandle` is a complete :class:`herder.TaskHandle` for a child
process; raw_exec uses it as is, and other drivers that run a local program
(java without isolation, qemu) can too. :func:`run_capped` runs a short
command with a timeout and capped output, as ``herder_task_exec`` needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from herder.objects import EXEC_OUTPUT_LIMIT, DriverNetwork, ExecResult, ExitResult


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


class ProcessHandle:
    """A task that is a child process leading its own process group.

    ``kill`` signals the whole group, so the task's children die with it.
    """

    def __init__(self, proc: subprocess.Popen[bytes], default_signal: int = signal.SIGINT,
                 network: DriverNetwork | None = None) -> None:
        self.proc = proc
        self.id = str(proc.pid)
        self.network = network
        self._default_signal = default_signal
        self._result: ExitResult | None = None
        self._lock = threading.Lock()

    @classmethod
    def spawn(cls, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path, stdout: IO[bytes],
              stderr: IO[bytes], user: str | None = None, default_signal: int = signal.SIGINT) -> ProcessHandle:
        """Start ``argv`` in a new session (so in its own process group)."""
        proc = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            start_new_session=True, user=user or None, close_fds=True,
        )
        return cls(proc, default_signal)

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        with self._lock:
            if self._result is None:
                self._result = exit_result(code)
                # The leader is gone: take any process it left behind with it.
                kill_group(self.proc.pid, signal.SIGKILL)
            return self._result

    def signal(self, sig: int) -> None:
        kill_group(self.proc.pid, sig)

    def kill(self, timeout: float, sig: int | None = None) -> None:
        if self.proc.poll() is None:
            kill_group(self.proc.pid, sig if sig is not None else self._default_signal)
            if self.wait(timeout) is not None:
                return
        kill_group(self.proc.pid, signal.SIGKILL)
        self.wait()

    def stats(self) -> dict[str, Any] | None:
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return {"pid": self.proc.pid, "memory_rss_bytes": int(line.split()[1]) * 1024}
        return {"pid": self.proc.pid}

    def state(self) -> dict[str, Any]:
        return {"pid": self.proc.pid}


def run_capped(argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: Path | None,
               timeout: float) -> ExecResult:
    """Run a command to completion, stdout and stderr together, capped at 64 KiB.

    :raises TimeoutError: when it outlives ``timeout`` (its process group is killed).
    """
    proc = subprocess.Popen(list(argv), env=dict(env) if env is not None else None, cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    assert proc.stdout is not None
    chunks: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(proc.stdout, chunks), daemon=True)
    reader.start()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        raise TimeoutError(f"command timed out after {timeout:g}s") from None
    finally:
        # Whatever the command left running would hold the output pipe open.
        kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        reader.join(5.0)
        proc.stdout.close()
    return ExecResult(exit_code=exit_result(proc.returncode).exit_code, output=b"".join(chunks))


def _drain(stream: IO[bytes], chunks: list[bytes]) -> None:
    """Read ``stream`` to its end, keeping only the first 64 KiB."""
    kept = 0
    while data := stream.read(65536):
        if kept < EXEC_OUTPUT_LIMIT:
            chunks.append(data[: EXEC_OUTPUT_LIMIT - kept])
            kept += len(chunks[-1])
