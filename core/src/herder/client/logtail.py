"""Reading a task's rotating log files as one stream, as they grow."""

from __future__ import annotations

from pathlib import Path

from herder.supervisor.logfiles import log_files


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
        for path in log_files(self.logs_dir, self.task, self.stream):
            index = int(path.name.rsplit(".", 1)[1])
            if index < self._index:
                continue
            if index > self._index:
                self._index, self._offset = index, 0
            try:
                with path.open("rb") as f:
                    f.seek(self._offset)
                    data = f.read(limit - size)
            except FileNotFoundError:
                continue
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
        for path in log_files(self.logs_dir, self.task, self.stream):
            index = int(path.name.rsplit(".", 1)[1])
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if offset < start + size:
                self._index, self._offset = index, offset - start
                return offset
            start += size
            last = (index, size)
        self._index, self._offset = last if last is not None else (-1, 0)
        return start

    def size(self) -> int:
        """The bytes in the files still there."""
        total = 0
        for path in log_files(self.logs_dir, self.task, self.stream):
            try:
                total += path.stat().st_size
            except FileNotFoundError:
                continue
        return total
