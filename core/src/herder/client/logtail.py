"""Reading a task's rotating log files as one stream, as they grow.

The task can write its log directory: every file is opened through a
descriptor of the directory, never through a link, and anything at a log
file's name that is not a file of its own (a link to a file of the host, a
FIFO...) is taken for missing, never read.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from herder.supervisor.logfiles import UnsafeFile, indexed_names, open_log_dir, open_log_file


class LogTail:
    """Follows ``<task>.<stream>.<n>`` across rotations: each :meth:`read` returns
    the bytes written since the previous one.

    When files were rotated away before they were read (more output than
    ``max_files`` can hold between two reads), reading resumes at the oldest
    file still there.
    """

    def __init__(self, logs_dir: Path, task: str, stream: str) -> None:
        self.logs_dir = logs_dir
        self.task = task
        self.stream = stream
        self._index = -1
        self._offset = 0

    def read(self, limit: int = 1 << 20) -> bytes:
        chunks: list[bytes] = []
        size = 0
        for index, fd in self._files():
            if index < self._index:
                continue
            if index > self._index:
                self._index, self._offset = index, 0
            data = os.pread(fd, limit - size, self._offset)
            self._offset += len(data)
            chunks.append(data)
            size += len(data)
            if size >= limit:
                break
        return b"".join(chunks)

    def seek(self, offset: int) -> int:
        """Go to ``offset`` bytes into the stream, counted across the files still
        there (oldest first); past the end, go to the end. Returns the offset
        now reached."""
        start = 0
        last: tuple[int, int] | None = None
        for index, fd in self._files():
            size = os.fstat(fd).st_size
            if offset < start + size:
                self._index, self._offset = index, offset - start
                return offset
            start += size
            last = (index, size)
        self._index, self._offset = last if last is not None else (-1, 0)
        return start

    def size(self) -> int:
        """The bytes in the files still there."""
        return sum(os.fstat(fd).st_size for _, fd in self._files())

    def _files(self) -> Iterator[tuple[int, int]]:
        """The number and an open descriptor of each log file there, oldest first.

        Each descriptor is closed when the next is asked for. A file removed
        meanwhile (rotated away) is skipped; so is a directory that is not
        one any more (a link put in its place): no file then.
        """
        try:
            dir_fd = open_log_dir(self.logs_dir)
        except OSError as err:
            if err.errno in (errno.ENOENT, errno.ENOTDIR):
                return
            raise
        try:
            for index, name in indexed_names(dir_fd, self.task, self.stream):
                try:
                    fd = open_log_file(dir_fd, name, os.O_RDONLY)
                except (FileNotFoundError, UnsafeFile):
                    continue
                try:
                    yield index, fd
                finally:
                    os.close(fd)
        finally:
            os.close(dir_fd)
