"""What job text may read from the host: the files of ``file()``.

Job text is data. Text read from a job file on the user's side (``herder
run``, ``herder validate``, ``herder job run``) may read files relative to
the job file's directory, as Nomad's CLI does: inside that directory's tree
only (no ``..`` out of it, no absolute path, no symbolic link followed),
unless the user allows more (``--allow-file-outside``, ``[client]
allow_file_outside``). Text submitted to the agent reads nothing: it has no
:class:`JobFiles` at all, whatever the request names as its ``source``.

A read is bounded (:data:`MAX_FILE_SIZE`), and the message of a refused read
names the path, never what the file holds.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

MAX_FILE_SIZE = 1 << 20
"""The most ``file()`` returns: a configuration file, not a disk image."""

REFUSED = ("file() is not available to jobs submitted to the agent: use `herder job run`, "
           "which reads files on your side")

_ALLOW = "(--allow-file-outside or [client] allow_file_outside = true allows it)"


class JobFileError(Exception):
    """A file the job text may not or cannot read; the message names the path, not the content."""


@dataclass(frozen=True)
class JobFiles:
    """The files job text may read: relative to ``base_dir`` (the job file's
    directory), inside its tree unless ``allow_outside``."""

    base_dir: Path
    allow_outside: bool = False

    def read(self, name: str) -> str:
        """The text of the file ``name``.

        :raises JobFileError: outside the tree, a link, not a regular file,
            over :data:`MAX_FILE_SIZE`, not UTF-8, or unreadable.
        """
        shown = self.base_dir / name
        fd = self._open_anywhere(shown) if self.allow_outside else self._open_inside(name)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise JobFileError(f"{shown} is not a regular file")
            data = b""
            while len(data) <= MAX_FILE_SIZE and (chunk := os.read(fd, MAX_FILE_SIZE + 1 - len(data))):
                data += chunk
        except OSError as exc:
            raise JobFileError(f"cannot read {shown}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        if len(data) > MAX_FILE_SIZE:
            raise JobFileError(f"{shown} is larger than {MAX_FILE_SIZE} bytes")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise JobFileError(f"{shown} is not UTF-8 text") from None

    def _open_anywhere(self, path: Path) -> int:
        try:
            # Non-blocking: a FIFO answers "not a regular file" instead of waiting for a writer.
            return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            raise JobFileError(_open_failure(path, exc)) from None

    def _open_inside(self, name: str) -> int:
        """Open ``name`` one component at a time from the base directory, never
        following a link, so nothing outside the tree can be reached."""
        parts = _inside_parts(name, self.base_dir)
        try:
            directory = os.open(self.base_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise JobFileError(f"cannot open the job file's directory {self.base_dir}: {exc.strerror}") from None
        try:
            for depth in range(1, len(parts)):
                opened = self._open_part(parts, depth, directory, os.O_DIRECTORY)
                os.close(directory)
                directory = opened
            return self._open_part(parts, len(parts), directory, os.O_NONBLOCK)
        finally:
            os.close(directory)

    def _open_part(self, parts: list[str], depth: int, directory: int, flags: int) -> int:
        """Open ``parts[depth - 1]`` in ``directory`` without following a link."""
        part = parts[depth - 1]
        try:
            return os.open(part, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, dir_fd=directory)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(part, directory):
                raise JobFileError(f"{self.base_dir.joinpath(*parts[:depth])} is a symbolic link: file() does "
                                   f"not follow links in the job file's directory {_ALLOW}") from None
            raise JobFileError(_open_failure(self.base_dir.joinpath(*parts), exc)) from None


def _inside_parts(name: str, base_dir: Path) -> list[str]:
    """The components of ``name`` with ``.`` and ``..`` resolved; an absolute
    path or a ``..`` above the base directory is refused."""
    path = PurePosixPath(name)
    refused = JobFileError(f"{name!r} is outside the job file's directory {base_dir}: file() reads only inside "
                           f"it {_ALLOW}")
    if path.is_absolute():
        raise refused
    parts: list[str] = []
    for part in path.parts:
        if part == "..":
            if not parts:
                raise refused
            parts.pop()
        elif part != ".":
            parts.append(part)
    if not parts:
        raise JobFileError(f"{name!r} names the job file's directory, not a file")
    return parts


def _is_link(name: str, directory: int) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=directory).st_mode)
    except OSError:
        return False


def _open_failure(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return f"no such file {path}"
    return f"cannot read {path}: {exc.strerror or exc}"
