"""An interactive command run as a local process: an :class:`herder.ExecSession`.

A driver whose ``herder_task_exec_session`` runs a program on the host (the
command itself, or its runtime's ``exec`` program such as ``runc exec
--tty``) returns an :class:`ExecProcess`. With a terminal, the command gets a
pseudo-terminal of its own, as its controlling terminal: resizing it sends the
command (or the runtime, which passes it on) ``SIGWINCH``. Without one, it
gets three pipes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import select
import struct
import subprocess
import termios
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from herder.objects import ExecStream
from herder.sdk.process import exit_result, kill_session
from herder.sdk.users import TaskUser
from herder.supervisor.netns import entered as entered_namespace

READ_SIZE = 65536


def _take_terminal() -> None:  # pragma: no cover - runs in the child, between fork and exec
    """Make stdin (the pseudo-terminal) the controlling terminal of the child's new session.

    Only an ioctl of an imported module: what runs between fork and exec in a threaded
    process must take no lock another thread could hold.
    """
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class ExecProcess:
    """A command in a session of its own, on a pseudo-terminal or pipes, read through one call.

    Use :meth:`start`; the constructor takes what it opened.
    """

    def __init__(self, proc: subprocess.Popen[bytes], outputs: dict[int, ExecStream], stdin: int | None,
                 terminal: int | None) -> None:
        self._proc = proc
        self._outputs = dict(outputs)  # those not at their end yet
        self._stdin = stdin
        self._terminal = terminal
        self._fds = {*outputs, *([stdin] if stdin is not None else [])}  # closed by close() alone
        # close() wakes a blocked read() or write() through this pipe (its byte is never read, so
        # every later select sees it), and closes the descriptors only once no read() or write()
        # uses them, so that none ever sees a reused descriptor.
        self._wake_r, self._wake_w = os.pipe()
        self._reading = threading.Lock()
        self._writing = threading.Lock()
        self._closing = threading.Lock()
        self._closed = False
        for fd in self._fds:
            os.set_blocking(fd, False)

    @classmethod
    def start(cls, argv: Sequence[str], *, env: Mapping[str, str] | None, cwd: Path | None, tty: bool,
              user: TaskUser | None = None, netns: Path | None = None) -> ExecProcess:
        """Start ``argv`` (as ``user`` when given) on a new pseudo-terminal when ``tty``, else on pipes;
        in the network namespace at ``netns`` when given.

        :raises OSError: the program could not be started.
        :raises DriverError: it cannot run as ``user``.
        """
        identity = user.popen_arguments() if user is not None else {}
        ours: list[int]
        if tty:
            terminal, child = os.openpty()
            ours, theirs = [terminal], (child, child, child)
        else:
            child_stdin, stdin = os.pipe()
            stdout, child_stdout = os.pipe()
            stderr, child_stderr = os.pipe()
            ours, theirs = [stdin, stdout, stderr], (child_stdin, child_stdout, child_stderr)
        try:
            with entered_namespace(netns):
                proc = subprocess.Popen(list(argv), env=dict(env) if env is not None else None, cwd=cwd,
                                        stdin=theirs[0], stdout=theirs[1], stderr=theirs[2], start_new_session=True,
                                        preexec_fn=_take_terminal if tty else None, **identity)
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            for fd in set(theirs):
                os.close(fd)
        if tty:
            return cls(proc, {terminal: "stdout"}, terminal, terminal)
        return cls(proc, {stdout: "stdout", stderr: "stderr"}, stdin, None)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def read(self) -> tuple[ExecStream, bytes] | None:
        with self._reading:
            while self._outputs and not self._closed:
                ready, _, _ = select.select([*self._outputs, self._wake_r], [], [])
                for fd in ready:
                    if fd == self._wake_r:
                        return None
                    try:
                        data = os.read(fd, READ_SIZE)
                    except BlockingIOError:
                        continue
                    except OSError as exc:
                        # A pseudo-terminal whose last other end closed reads EIO, not end of file.
                        if exc.errno != errno.EIO:
                            raise
                        data = b""
                    if data:
                        return self._outputs[fd], data
                    del self._outputs[fd]
            return None

    def write(self, data: bytes) -> None:
        with self._writing:
            if self._stdin is None:
                return
            view = memoryview(data)
            while view:
                # Waits for room, not in os.write: a command that reads no stdin must not hold
                # this thread past close().
                woken, _, _ = select.select([self._wake_r], [self._stdin], [])
                if woken:
                    return
                try:
                    view = view[os.write(self._stdin, view):]
                except BlockingIOError:
                    continue
                except OSError:
                    return  # the command is gone or closed its stdin: as the protocol says, ignored

    def close_stdin(self) -> None:
        with self._writing:
            if self._stdin is None:
                return
            if self._terminal is not None:
                # A terminal has no end of its own: the line discipline's EOF character ends a read.
                with contextlib.suppress(OSError):
                    os.write(self._terminal, b"\x04")
            else:
                os.close(self._stdin)
                self._fds.discard(self._stdin)
            self._stdin = None

    def resize(self, width: int, height: int) -> None:
        with self._writing:
            if self._terminal is None or self._closed:
                return
            fcntl.ioctl(self._terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            returncode = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return exit_result(returncode).exit_code

    def close(self) -> None:
        with self._closing:
            if self._closed:
                return
            self._closed = True
        os.write(self._wake_w, b"x")
        # The command's whole session: what it started would otherwise keep running, a shell's
        # background jobs too (each in a process group of its own).
        kill_session(self._proc.pid, leader_gone=self._proc.returncode is not None)
        self._proc.wait()
        with self._reading, self._writing:
            self._outputs.clear()
            self._stdin = None
            for fd in (*self._fds, self._wake_r, self._wake_w):
                os.close(fd)
            self._fds.clear()
