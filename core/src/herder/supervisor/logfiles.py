"""A task's rotating log files, as the supervisor and the log sinks write them.

``<logs_dir>/<task>.<stream>.<n>``, the way Nomad's logmon keeps them: a file
is rotated when it reaches ``max_file_size`` MB, at most ``max_files`` files
are kept, and the numbers go upward, so the highest is the newest.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

STREAMS = ("stdout", "stderr")
"""The streams a task's output is captured from; the middle part of a log file's name."""

_MB = 1024 * 1024

_OPEN_ATTEMPTS = 3
"""How often :func:`open_log_file` tries when what is at the name keeps vanishing."""


class UnsafeFile(Exception):
    """What is at a log file's name is not a file of its own: a link, a FIFO, a device, a directory..."""

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(f"{name} is {kind}")
        self.name = name
        self.kind = kind


def open_log_dir(logs_dir: Path) -> int:
    """A descriptor of ``logs_dir``, through which its files are opened.

    Its tasks can write the directory that holds it (``alloc``): opened once,
    with ``O_NOFOLLOW``, so that a link or another directory put in its place
    later is never written to.

    :raises OSError: when it cannot be opened; ``NotADirectoryError`` when it is a link or a file.
    """
    try:
        return os.open(logs_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory (a link is never followed)",
                                     str(logs_dir)) from None
        raise


def open_log_file(dir_fd: int, name: str, flags: int) -> int:
    """Open the regular file ``name`` of the directory ``dir_fd`` with ``flags``, never through a link.

    What is there is looked at through an ``O_PATH`` descriptor first, which
    opens nothing (a FIFO would block, a device could act on being opened),
    and reopened only if it is a regular file with no other name (a hard
    link could name a file outside). With ``O_CREAT`` in ``flags``, a file
    that is not there is made, mode 0644.

    :raises UnsafeFile: when something else is at ``name``.
    :raises OSError: as :func:`os.open` (``FileNotFoundError`` without ``O_CREAT``).
    """
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_OPEN_ATTEMPTS):
        if flags & os.O_CREAT:
            try:
                return os.open(name, flags | os.O_EXCL, 0o644, dir_fd=dir_fd)
            except FileExistsError:
                pass
        try:
            handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            if flags & os.O_CREAT:
                continue  # removed meanwhile: make it
            raise
        try:
            st = os.fstat(handle)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
                raise UnsafeFile(name, _kind(st))
            return os.open(f"/proc/self/fd/{handle}", flags & ~(os.O_CREAT | os.O_NOFOLLOW))
        finally:
            os.close(handle)
    raise FileNotFoundError(errno.ENOENT, "removed as fast as it was made", name)


def _kind(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return kind
    return "a hard link" if stat.S_ISREG(mode) else "not a regular file"


def log_files(logs_dir: Path, task: str, stream: str) -> list[Path]:
    """The log files of ``task``'s ``stream`` in ``logs_dir``, oldest first (links and the like left out)."""
    try:
        dir_fd = open_log_dir(logs_dir)
    except OSError:
        return []
    try:
        return [logs_dir / name for _, name in indexed_names(dir_fd, task, stream)]
    finally:
        os.close(dir_fd)


def indexed_names(dir_fd: int, task: str, stream: str) -> list[tuple[int, str]]:
    """The numbers and names of ``task``'s ``stream`` files in the directory ``dir_fd``, oldest first."""
    prefix = f"{task}.{stream}."
    found = []
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            # Plain string tests, no regular expression: the supervisor runs this at every start.
            number = entry.name[len(prefix) :]
            if (entry.name.startswith(prefix) and number.isascii() and number.isdigit()
                    and entry.is_file(follow_symlinks=False)):
                found.append((int(number), entry.name))
    return sorted(found)


class RotatingFile:
    """The file one stream is being written to, and the rotation to the next.

    On opening, it continues in the newest existing file if that has room
    (the task was restarted, or the agent was), so numbering never starts over.
    A writer calls :meth:`make_room` (which rotates a full file), then
    :meth:`splice_from` a pipe or :meth:`write` at most :attr:`room` bytes;
    both keep :attr:`size` up to date. :class:`herder.supervisor.pump.LogPump`
    moves a pipe's output in this way.

    Files are opened without ``O_APPEND``, which ``splice`` refuses: herder is
    their only writer, and writes at the end it keeps track of.

    The task can write the log directory, so every file is opened, made and
    removed through a descriptor of it held from the start, never following a
    link. Something else the task put at a log file's name (a link to a file
    of the host, say) is removed, never followed, and reported to
    ``on_unsafe`` (with a message saying so); the output goes on in the next
    file.
    """

    def __init__(self, logs_dir: Path, task: str, stream: str, max_files: int, max_file_size: int,
                 on_unsafe: Callable[[str], None] | None = None) -> None:
        """``max_file_size`` is in MB (MiB, as Nomad counts them)."""
        if max_files < 1 or max_file_size < 1:
            raise ValueError("logs need max_files >= 1 and max_file_size >= 1")
        self._logs_dir = logs_dir
        self._task = task
        self._stream = stream
        self._max_files = max_files
        self._max_bytes = max_file_size * _MB
        self._on_unsafe = on_unsafe
        self.fd = -1
        self.index = 0
        self.size = 0
        try:
            self._dir_fd = open_log_dir(logs_dir)
        except NotADirectoryError:
            if on_unsafe is not None:
                on_unsafe(f"{logs_dir} is not a directory (a link, say): never followed; {task}'s {stream} "
                          "is not kept")
            raise
        try:
            existing = indexed_names(self._dir_fd, task, stream)
            self._open(existing[-1][0] if existing else 0)
            if self.room == 0:
                self.rotate()
            else:
                self._purge()
        except BaseException:
            self.close()
            raise

    @property
    def room(self) -> int:
        """How many more bytes the current file takes before it is full."""
        return max(0, self._max_bytes - self.size)

    @property
    def label(self) -> str:
        """The stream and task, for messages: ``stdout of task web``."""
        return f"{self._stream} of task {self._task}"

    def make_room(self) -> None:
        """Make sure a file is open with :attr:`room` for at least one byte: rotate if need be.

        :raises OSError: when the next file cannot be opened (the next call tries it again).
        """
        if self.fd < 0 or self.room == 0:
            self.rotate()

    def write(self, data: memoryview) -> None:
        """Write all of ``data`` to the current file (the caller keeps it within :attr:`room`).

        :raises OSError: when a write fails; :attr:`size` counts what was written before.
        """
        while data:
            written = os.write(self.fd, data)
            self.size += written
            data = data[written:]

    def splice_from(self, pipe: int, limit: int) -> int:
        """Move up to ``limit`` bytes from the nonblocking ``pipe`` into the current file with ``splice(2)``.

        The bytes never pass through this process.

        :returns: the bytes moved, 0 at the pipe's end.
        :raises BlockingIOError: when the pipe is empty for now.
        :raises OSError: as ``splice(2)`` (see :data:`herder.supervisor.pump.NO_SPLICE`).
        """
        moved = os.splice(pipe, self.fd, limit, flags=os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK)
        self.size += moved
        return moved

    def rotate(self) -> None:
        """Close the current file, start the next one and drop the oldest beyond ``max_files``.

        If the next file cannot be opened, the error propagates and the next
        call tries the same file again.
        """
        self._close_file()
        while True:
            self._open(self.index + 1)
            if self.room:
                break
            self._close_file()
        self._purge()

    def close(self) -> None:
        """Close the current file and the directory: the end of this stream's writing."""
        self._close_file()
        if self._dir_fd >= 0:
            os.close(self._dir_fd)
            self._dir_fd = -1

    def _close_file(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _name(self, index: int) -> str:
        return f"{self._task}.{self._stream}.{index}"

    def _open(self, index: int) -> None:
        """Open file ``index``, or the first one after it with a file (not something planted) at its name."""
        reopened = False
        while True:
            try:
                self.fd = open_log_file(self._dir_fd, self._name(index), os.O_WRONLY | os.O_CREAT)
                break
            except UnsafeFile as unsafe:
                self._remove_unsafe(unsafe, index + 1)
                index += 1
            except FileNotFoundError:
                if reopened or os.fstat(self._dir_fd).st_nlink:
                    raise
                # The directory was removed (a failing disk, someone cleaning up): if one is made again,
                # it is opened as the first was, never through a link.
                replacement = open_log_dir(self._logs_dir)
                os.close(self._dir_fd)
                self._dir_fd, reopened = replacement, True
        self.size = os.lseek(self.fd, 0, os.SEEK_END)
        self.index = index

    def _remove_unsafe(self, unsafe: UnsafeFile, next_index: int) -> None:
        try:
            os.unlink(unsafe.name, dir_fd=self._dir_fd)  # the entry itself: unlink never follows a link
            done = "removed it without following it"
        except OSError as err:  # a directory, say
            done = f"left it there ({err.strerror}), never followed"
        message = (f"{self._logs_dir / unsafe.name} was {unsafe.kind}, not a log file: {done}; "
                   f"output goes on in {self._name(next_index)}")
        log.warning("%s", message)
        if self._on_unsafe is not None:
            self._on_unsafe(message)

    def _purge(self) -> None:
        for index, name in indexed_names(self._dir_fd, self._task, self._stream):
            if index <= self.index - self._max_files:
                try:
                    os.unlink(name, dir_fd=self._dir_fd)
                except FileNotFoundError:
                    pass
                except OSError as err:
                    log.warning("cannot remove old log file %s: %s", self._logs_dir / name, err)
