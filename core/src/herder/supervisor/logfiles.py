"""A task's rotating log files, as the supervisor and the log sinks write them.

``<logs_dir>/<task>.<stream>.<n>``, the way Nomad's logmon keeps them: a file
is rotated when it reaches ``max_file_size`` MB, at most ``max_files`` files
are kept, and the numbers go upward, so the highest is the newest.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

STREAMS = ("stdout", "stderr")
"""The streams a task's output is captured from; the middle part of a log file's name."""

PIPE_SIZE = 1024 * 1024
"""The pipe buffer asked for: how much output a task can write ahead of the disk."""

_MB = 1024 * 1024


def log_files(logs_dir: Path, task: str, stream: str) -> list[Path]:
    """The log files of ``task``'s ``stream`` in ``logs_dir``, oldest first."""
    return [path for _, path in _indexed_files(logs_dir, task, stream)]


def _indexed_files(logs_dir: Path, task: str, stream: str) -> list[tuple[int, Path]]:
    prefix = f"{task}.{stream}."
    try:
        entries = list(os.scandir(logs_dir))
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        # Plain string tests, no regular expression: the supervisor runs this at every start.
        number = entry.name[len(prefix) :]
        if (entry.name.startswith(prefix) and number.isascii() and number.isdigit()
                and entry.is_file(follow_symlinks=False)):
            found.append((int(number), Path(entry.path)))
    return sorted(found)


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


class RotatingFile:
    """The file one stream is being written to, and the rotation to the next.

    On opening, it continues in the newest existing file if that has room
    (the task was restarted, or the agent was), so numbering never starts over.
    The writer keeps :attr:`size` up to date (:meth:`write` does) and calls
    :meth:`rotate` when :attr:`room` is 0.
    """

    def __init__(self, logs_dir: Path, task: str, stream: str, max_files: int, max_file_size: int) -> None:
        """``max_file_size`` is in MB (MiB, as Nomad counts them)."""
        if max_files < 1 or max_file_size < 1:
            raise ValueError("logs need max_files >= 1 and max_file_size >= 1")
        self._logs_dir = logs_dir
        self._task = task
        self._stream = stream
        self._max_files = max_files
        self._max_bytes = max_file_size * _MB
        self.fd = -1
        self.index = 0
        self.size = 0
        existing = _indexed_files(logs_dir, task, stream)
        self._open(existing[-1][0] if existing else 0)
        if self.room == 0:
            self.rotate()
        else:
            self._purge()

    @property
    def room(self) -> int:
        """How many more bytes the current file takes before it is full."""
        return max(0, self._max_bytes - self.size)

    def write(self, data: memoryview) -> None:
        """Write all of ``data`` to the current file (the caller keeps it within :attr:`room`)."""
        while data:
            written = os.write(self.fd, data)
            self.size += written
            data = data[written:]

    def rotate(self) -> None:
        """Close the current file, start the next one and drop the oldest beyond ``max_files``.

        If the next file cannot be opened, the error propagates and the next
        call tries the same file again.
        """
        self.close()
        while True:
            self._open(self.index + 1)
            if self.room:
                break
            self.close()
        self._purge()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _open(self, index: int) -> None:
        path = self._logs_dir / f"{self._task}.{self._stream}.{index}"
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.index = index

    def _purge(self) -> None:
        for index, path in _indexed_files(self._logs_dir, self._task, self._stream):
            if index <= self.index - self._max_files:
                try:
                    path.unlink(missing_ok=True)
                except OSError as err:
                    log.warning("cannot remove old log file %s: %s", path, err)
