"""The log pump: what moves a task's output from a pipe into its rotating log files.

There is one, used by the supervisor for every process it runs and by the
in-process log sinks (:mod:`herder.client.logs`). Bytes go from the pipe to
the file with ``splice(2)``, never through this process, unless the kernel
refuses it for the file (then, and from then on, with ``readv(2)`` into a
buffer and ``write(2)``). Either way the file's size is counted, so that it is
rotated at exactly its ``max_file_size``.

A task never waits on the disk beyond its pipe's buffer: when writing fails
(the disk is full, a quota is reached, an I/O error), the pump goes on taking
the output from the pipe and drops it, counting the bytes, and tries to write
again with every read; it reports when it starts dropping and, once writing
works again (or the output ends), how many bytes it dropped.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from herder.supervisor.logfiles import RotatingFile

log = logging.getLogger(__name__)

PIPE_SIZE = 1024 * 1024
"""The pipe buffer asked for: how much output a task can write ahead of the disk."""

NO_SPLICE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})
"""What ``splice(2)`` answers for a file it cannot write to (a filesystem without it, say)."""


class Dropped(NamedTuple):
    """A pump's report of output it could not write: when it starts dropping, and when it stops."""

    stream: str
    message: str
    bytes: int | None = None
    """The bytes dropped, in the report that ends a spell of dropping (writing works again, or the output
    ended); None in the report that starts it."""

    def details(self) -> dict[str, str | int]:
        """The details of the task event that reports it (:data:`herder.events.LOGS_DROPPED`)."""
        return {"stream": self.stream} if self.bytes is None else {"stream": self.stream, "bytes": self.bytes}


@functools.cache
def _pipe_max_size() -> int:
    try:
        return int(Path("/proc/sys/fs/pipe-max-size").read_text())
    except (OSError, ValueError):
        return PIPE_SIZE


def enlarge_pipe(fd: int) -> int:
    """Grow a pipe's buffer to :data:`PIPE_SIZE`, or as far as allowed; return its size."""
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None)
    if set_size is None:
        return 64 * 1024
    for size in dict.fromkeys((PIPE_SIZE, min(PIPE_SIZE, _pipe_max_size()))):
        try:
            return int(fcntl.fcntl(fd, set_size, size))
        except OSError:
            continue
    return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))


class LogPump:
    """One output pipe of a task (its nonblocking read end), and the rotating files it goes to.

    The pump owns both: :meth:`close` closes them. Whoever waits for the pipe
    to be readable (the supervisor's event loop, a log sink's thread) calls
    :meth:`pump`; ``buffer`` is where bytes go through when they are not
    spliced, or dropped. ``on_dropped`` hears of output that could not be
    written (see :class:`Dropped`).
    """

    __slots__ = ("_on_dropped", "_splice", "capacity", "dropped", "error", "fd", "file", "stream", "taken")

    def __init__(self, stream: str, fd: int, file: RotatingFile,
                 on_dropped: Callable[[Dropped], None] | None = None, splice: bool = True) -> None:
        self.stream = stream
        self.fd = fd
        self.file = file
        self.capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
        self.error: OSError | None = None
        """Why output is being dropped (the disk is full, say); None while it is written."""
        self.dropped = 0
        """Bytes taken from the pipe and dropped since :attr:`error` was set."""
        self.taken = 0
        """Bytes taken from the pipe so far, written or dropped."""
        self._on_dropped = on_dropped
        self._splice = splice and hasattr(os, "splice")

    @property
    def splices(self) -> bool:
        """Whether output moves with ``splice(2)`` (else with ``readv``/``write``)."""
        return self._splice

    def pump(self, buffer: memoryview) -> int | None:
        """Move what the pipe holds into the files, never past the end of the current one.

        :returns: the bytes taken from the pipe (written or dropped), 0 at its end (no writer
            left), None when it is empty for now.
        """
        moved = self._move(buffer)
        self.taken += moved or 0
        if moved is not None and moved >= self.capacity and self.capacity < PIPE_SIZE:
            # The pipe was full: this task writes in bulk, let it write ahead of the disk. Pipes grow
            # only then because a user's pipe buffers are limited in all (pipe-user-pages-soft, 64 MiB
            # by default): a thousand quiet tasks must not take them from the busy ones.
            self.capacity = enlarge_pipe(self.fd)
        return moved

    def drain(self, buffer: memoryview) -> None:
        """Save what the pipe holds now, as capture stops while a writer may still hold the pipe.

        At most what a pipe holds: a writer that keeps writing cannot keep the pump here.
        """
        budget = PIPE_SIZE
        while budget > 0 and (moved := self.pump(buffer)):
            budget -= moved

    def close(self) -> None:
        """Close the pipe and the files, reporting what was dropped up to the end, if anything was."""
        os.close(self.fd)
        self.fd = -1
        self.file.close()
        if self.error is not None:
            self._written_again("the output ended")

    def _move(self, buffer: memoryview) -> int | None:
        file = self.file
        try:
            file.make_room()
            if self._splice and (moved := self._splice_in()) is not None:
                return self._written(moved)
        except BlockingIOError:
            return None
        except OSError as err:
            return self._drop(buffer, err)
        try:
            moved = os.readv(self.fd, [buffer[: file.room]])
        except BlockingIOError:
            return None
        before = file.size
        try:
            file.write(buffer[:moved])
        except OSError as err:
            self._failed(err, moved - (file.size - before))
            return moved
        return self._written(moved)

    def _splice_in(self) -> int | None:
        """Splice what the pipe holds; None when the file refuses ``splice`` (then never tried again)."""
        try:
            return self.file.splice_from(self.fd, self.file.room)
        except OSError as err:
            if err.errno not in NO_SPLICE:
                raise
            log.info("%s: splice refused (%s), copying instead", self.file.label, err.strerror)
        self._splice = False
        return None

    def _written(self, moved: int) -> int:
        if moved and self.error is not None:
            self._written_again("writing again")
        return moved

    def _drop(self, buffer: memoryview, err: OSError) -> int | None:
        """The disk failed: take what the pipe holds all the same, and drop it."""
        try:
            moved = os.readv(self.fd, [buffer])
        except BlockingIOError:
            return None
        if moved:  # else the end of the output: nothing lost
            self._failed(err, moved)
        return moved

    def _failed(self, err: OSError, dropped: int) -> None:
        if self.error is None:
            log.warning("%s: cannot write logs, dropping output until it works again: %s", self.file.label, err)
            self._report(f"{self.stream}: cannot write the log file ({_reason(err)}): output is dropped until "
                         "it can be written", None)
        self.error = err
        self.dropped += dropped

    def _written_again(self, how: str) -> None:
        assert self.error is not None
        message = f"{self.stream}: {self.dropped} bytes of output dropped ({_reason(self.error)}); {how}"
        log.warning("%s: %s", self.file.label, message)
        self._report(message, self.dropped)
        self.error, self.dropped = None, 0

    def _report(self, message: str, dropped: int | None) -> None:
        if self._on_dropped is None:
            return
        try:
            self._on_dropped(Dropped(self.stream, message, dropped))
        except Exception:  # the listener's trouble (a full disk for its events too, say) must not stop the pump
            log.exception("%s: reporting dropped output failed", self.file.label)


def _reason(err: OSError) -> str:
    return err.strerror or str(err)
