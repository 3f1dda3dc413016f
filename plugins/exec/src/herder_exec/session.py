"""An interactive ``runc exec``: the :class:`herder.ExecSession` of a command in a task's container."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path

from herder import ExecStream
from herder.sdk import ExecProcess, kill_session

PID_FILE_WAIT = 30.0
"""How long close() waits, while ``runc exec`` runs, for the pid file runc writes once the command started."""
PID_FILE_POLL = 0.05


class RuncExecSession:
    """``runc exec [--tty] --pid-file FILE CONTAINER COMMAND...`` run as an :class:`ExecProcess`.

    Reading, writing and resizing go to ``runc exec``, which proxies its
    terminal (or passes its pipes) to the command and passes a resize
    (``SIGWINCH``) on to the command's terminal; it exits with the command's
    exit code. But the command is not ``runc exec``'s: runc starts it in a
    session of its own in the container, and killing runc leaves it running.
    So :meth:`close` ends the command's whole session, by the host pid runc
    wrote into ``pid_file``, then ``runc exec`` itself.
    """

    def __init__(self, process: ExecProcess, pid_file: Path) -> None:
        self._process = process
        self._pid_file = pid_file
        self._closing = threading.Lock()
        self._closed = False

    def read(self) -> tuple[ExecStream, bytes] | None:
        return self._process.read()

    def write(self, data: bytes) -> None:
        self._process.write(data)

    def close_stdin(self) -> None:
        self._process.close_stdin()

    def resize(self, width: int, height: int) -> None:
        self._process.resize(width, height)

    def wait(self, timeout: float | None = None) -> int | None:
        return self._process.wait(timeout)

    def close(self) -> None:
        with self._closing:
            if self._closed:
                return
            self._closed = True
        pid = self._command_pid()
        if pid is not None:
            # Once runc exec has exited, it has reaped the command: the number may be another's by now.
            kill_session(pid, signal.SIGKILL, leader_gone=self._process.wait(0) is not None)
        self._process.close()
        self._pid_file.unlink(missing_ok=True)

    def _command_pid(self) -> int | None:
        """The command's host pid from runc's pid file, waiting for it while ``runc exec`` is still
        starting the command; None when runc ended without writing it (the command never ran)."""
        deadline = time.monotonic() + PID_FILE_WAIT
        while True:
            starting = self._process.wait(0) is None  # runc writes the file once the command runs
            with contextlib.suppress(OSError, ValueError):
                return int(self._pid_file.read_text())
            if not starting or time.monotonic() >= deadline:
                return None
            time.sleep(PID_FILE_POLL)
