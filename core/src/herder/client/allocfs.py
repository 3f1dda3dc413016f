"""An allocation's files as its tasks see them, read for an API client (``nomad alloc fs``).

The allocation directory is written by its tasks, so everything in it is
hostile: a task can plant a link to a host file, a FIFO that blocks its
reader, a hard link to a file it cannot read itself (where the kernel lets
it), or swap a directory for a link between a check and a use. The agent
reads as root, so nothing is reached by path:

- a path is split into names (:func:`herder.sdk.safefs.components`: no
  ``..``, a leading ``/`` is the allocation directory), and every directory on
  the way is opened relative to its parent's descriptor with ``O_NOFOLLOW |
  O_DIRECTORY`` (:func:`herder.sdk.safefs.open_dir`): a link anywhere on the
  way is refused, never followed, even one swapped in meanwhile;
- the last name is looked at with ``lstat`` (a link is shown as a link,
  never its target) and opened for reading only through
  :func:`herder.sdk.safefs.open_file`: ``O_NOFOLLOW | O_NONBLOCK``, then
  ``fstat`` of what was opened must be a regular file with no other name (a
  hard link's other name may be a host file's, as for log files), before a
  byte is read;
- the view is the task's (Nomad's): at the top, the shared ``alloc``
  directory and the task directories, nothing else herder keeps in the
  allocation directory (its staging directories); a task's ``secrets`` are
  listed but never read, as Nomad refuses it.

Reads are bounded by the caller: a file is read in chunks, never whole. A
listing is bounded here (:data:`MAX_ENTRIES`).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from herder.errors import HerderError
from herder.sdk.paths import ALLOC_SHARED
from herder.sdk.safefs import UnsafePathError, components, open_beneath, open_file, safe_root

SECRETS = "secrets"
MAX_ENTRIES = 10_000
"""The most entries a directory listing has: a task can make a million names, each a row the agent would
hold and send; a directory with more is refused, whole."""
SNIFF = 512
"""The bytes :meth:`AllocFiles.stat` reads to tell text from binary, as Nomad's content type detection."""


class FileRefused(HerderError):
    """A path that is not served: outside the task's view, a link, not a regular file, a secret.
    ``missing`` tells one that is not there from one refused."""

    def __init__(self, message: str, *, missing: bool = False) -> None:
        super().__init__(message)
        self.missing = missing


@dataclass(frozen=True)
class FileInfo:
    """A name in an allocation directory, as ``lstat`` sees it: a link is a link."""

    name: str
    mode: int
    """``st_mode``: the type and permission bits."""
    size: int
    modified_ns: int
    content_type: str = ""
    """Only :meth:`AllocFiles.stat` says it: ``text/plain; charset=utf-8``, ``application/json`` or
    ``application/octet-stream``."""

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


class AllocFiles:
    """The files of the allocation in ``alloc_dir`` whose tasks are ``tasks``, as the tasks see them."""

    def __init__(self, alloc_dir: Path, tasks: Sequence[str]) -> None:
        self.alloc_dir = alloc_dir
        self.tops = frozenset((ALLOC_SHARED, *tasks))

    def entries(self, path: str) -> list[FileInfo]:
        """The entries of directory ``path``, sorted by name; at the top, only the task's view."""
        parts = self._parts(path)
        with self._dir(parts, path) as fd:
            names: list[str] = []
            with os.scandir(fd) as listing:
                for entry in listing:
                    if not (parts or entry.name in self.tops):
                        continue
                    if len(names) == MAX_ENTRIES:
                        raise FileRefused(f"{path}: more than {MAX_ENTRIES} entries; not listed")
                    names.append(entry.name)
            found = []
            names.sort()
            for name in names:
                try:
                    found.append(_info(name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
                except FileNotFoundError:  # removed by a task meanwhile
                    continue
            return found

    def stat(self, path: str) -> FileInfo:
        """What ``path`` is (a link is a link); for a regular file the caller may read, its content type."""
        parts = self._parts(path)
        if not parts:
            with self._dir(parts, path) as fd:
                return _info(self.alloc_dir.name, os.fstat(fd), "application/octet-stream")
        with self._dir(parts[:-1], path) as parent:
            try:
                found = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                raise _missing(path) from None
            content_type = "application/octet-stream"
            if stat.S_ISREG(found.st_mode) and not self._secret(parts):
                content_type = _content_type(parts[-1], _sniff(parent, parts[-1]))
            return _info(parts[-1], found, content_type)

    @contextmanager
    def open(self, path: str) -> Iterator[tuple[int, int]]:
        """Open the regular file ``path`` for reading: its descriptor and its size when opened.

        :raises FileRefused: not there, outside the task's view, a link on the way or at the
            end, not a regular file (a FIFO is never waited on), a hard link, a task's secret.
        """
        parts = self._parts(path)
        if not parts:
            raise FileRefused(f"file {path!r} is a directory")
        if self._secret(parts):
            raise FileRefused(f"Reading secret file prohibited: {path}")
        with self._dir(parts[:-1], path) as parent:
            try:
                fd = open_file(parent, parts[-1])
            except FileNotFoundError:
                raise _missing(path) from None
            except BlockingIOError:
                # The task holds a write lease on its file (F_SETLEASE): an open is refused until it gives it
                # up, and it need not. Refused as any file that is not served, not an error of the agent's.
                raise FileRefused(f"{path}: held by a lease of the task's (busy); not read") from None
            except UnsafePathError as exc:
                directory = exc.reason == "not a regular file" and _is_dir(parent, parts[-1])
                raise FileRefused(f"file {path!r} is a directory" if directory
                                  else f"{path}: {exc.reason}; not read") from None
        try:
            status = os.fstat(fd)
            if status.st_nlink > 1:
                raise FileRefused(f"{path}: a hard link (a file with another name, maybe a host file's); not read")
            yield fd, status.st_size
        finally:
            os.close(fd)

    def _parts(self, path: str) -> list[str]:
        """The names in ``path`` from the allocation directory (a leading ``/`` is it), the first in the view."""
        if "\0" in path:  # no name holds one, and os.open raises ValueError for it: a 500 on every route
            raise FileRefused(f"{path!r}: a NUL byte, which no file name holds")
        try:
            parts = components(path.lstrip("/"))
        except UnsafePathError as exc:
            raise FileRefused(f"{path}: {exc.reason}") from None
        if parts and parts[0] not in self.tops:
            raise _missing(path)
        return parts

    @staticmethod
    def _secret(parts: list[str]) -> bool:
        return len(parts) > 1 and parts[0] != ALLOC_SHARED and parts[1] == SECRETS

    @contextmanager
    def _dir(self, parts: list[str], path: str) -> Iterator[int]:
        """The directory ``parts`` open, every name on the way opened without following a link."""
        try:
            with safe_root(self.alloc_dir) as root, open_beneath(root, "/".join(parts)) as fd:
                yield fd
        except FileNotFoundError:
            raise _missing(path) from None
        except UnsafePathError as exc:
            raise FileRefused(f"{path}: {exc}") from None
        except NotADirectoryError:
            raise FileRefused(f"{path}: not a directory") from None


def _missing(path: str) -> FileRefused:
    return FileRefused(f"{path}: no such file or directory", missing=True)


def _info(name: str, found: os.stat_result, content_type: str = "") -> FileInfo:
    # A task names its files with any bytes; those that are not UTF-8 come as lone surrogates, which no JSON
    # answer can carry: the listing failed whole (a 500), so a task hid its directory. Shown as Go's JSON
    # encoder shows Nomad's, each invalid byte a U+FFFD.
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return FileInfo(name=name, mode=found.st_mode, size=found.st_size, modified_ns=found.st_mtime_ns,
                    content_type=content_type)


def _is_dir(parent: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def _sniff(parent: int, name: str) -> bytes:
    """The first bytes of a regular file with no other name, opened as a read is (:func:`open_file`);
    a NUL (binary) for anything that would not be read."""
    try:
        fd = open_file(parent, name)
    except (OSError, UnsafePathError):
        return b"\0"
    try:
        return os.pread(fd, SNIFF, 0) if os.fstat(fd).st_nlink == 1 else b"\0"
    finally:
        os.close(fd)


def _content_type(name: str, head: bytes) -> str:
    """Nomad's content type, roughly: JSON by its name, text when the first bytes are UTF-8 without NUL."""
    if name.endswith(".json"):
        return "application/json"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not a character cut at the end of the sample
            return "application/octet-stream"
    return "application/octet-stream" if b"\0" in head else "text/plain; charset=utf-8"
