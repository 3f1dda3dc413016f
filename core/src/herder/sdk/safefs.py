"""Files in directories someone else can write, reached without following a link.

herder runs as root and writes into directories a task can write (its task
directory, the shared ``alloc`` directory). Checking a path and then using it
by name is not safe there: between the two, the task can replace a directory
with a link to ``/etc`` and root writes the host's files. Everything here
works relative to an open directory descriptor instead, one path component at
a time, and opens every component with ``O_NOFOLLOW``: a link or a swapped
directory is refused (:class:`UnsafePathError`), never followed.

A typical write::

    with safe_root(task_dir.dir) as root, open_beneath(root, "local/conf", create=0o755) as fd:
        write_atomic(fd, "app.conf", data, mode=0o640, owner=(uid, gid))

Only portable ``os`` calls with ``dir_fd`` are used (no ``openat2``), so the
guarantee does not depend on the kernel's ``RESOLVE_*`` flags.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath

from herder.errors import HerderError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC
# A write through a link is refused with one of these; which one depends on the flags.
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)


class UnsafePathError(HerderError):
    """A path component is a link, or not what it must be (a directory, a regular file).

    ``path`` is the path as the caller named it (relative to its root) up to
    and including the offending component; ``reason`` says what it is.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}; not followed")
        self.path = path
        self.reason = reason


def components(relative: str | PurePosixPath) -> list[str]:
    """The names in a relative path, without empty or ``.`` parts.

    ``..`` and absolute paths are refused: a path must stay beneath the
    directory it is opened from, and that is decided here, not by resolving it.
    """
    text = str(relative)
    if text.startswith("/"):
        raise UnsafePathError(text, "an absolute path, where a path relative to its directory is needed")
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise UnsafePathError(text, "'..' leaves the directory it is relative to")
    return parts


def _explain(dir_fd: int, name: str, shown: str, expected: str) -> UnsafePathError:
    """The error for ``name`` in ``dir_fd`` not opening as ``expected``, saying what it is instead."""
    try:
        mode = os.lstat(name, dir_fd=dir_fd).st_mode
    except OSError:
        return UnsafePathError(shown, f"not {expected} (it changed while being opened)")
    if stat.S_ISLNK(mode):
        return UnsafePathError(shown, "a link")
    if _KINDS[expected](mode):  # what it must be now, so not when it was opened: swapped in between
        return UnsafePathError(shown, f"a link or not {expected} when opened, swapped since")
    return UnsafePathError(shown, f"not {expected}")


_KINDS = {"a directory": stat.S_ISDIR, "a regular file": stat.S_ISREG}
"""What :func:`_explain` may expect a name to be, and how its mode says so."""


def open_root(path: Path | str) -> int:
    """Open a directory herder itself named (a task or allocation directory) as a root.

    The path's last component must be a directory, not a link to one. The
    caller closes the descriptor; the context manager :func:`safe_root` does it in a ``with``.
    """
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError as err:
        if err.errno in _LINK_ERRNOS:
            parent, name = os.path.split(os.path.abspath(path))
            fd = os.open(parent, _DIR_FLAGS & ~os.O_NOFOLLOW)
            try:
                raise _explain(fd, name, str(path), "a directory") from None
            finally:
                os.close(fd)
        raise


def open_dir(dir_fd: int, relative: str | PurePosixPath, *, create: int | None = None,
             owner: tuple[int, int] | None = None) -> int:
    """Open the directory ``relative`` beneath ``dir_fd``, component by component, following no link.

    With ``create`` (a mode such as ``0o755``), missing directories are made
    with that mode, set exactly (the umask does not apply) and, with
    ``owner``, owned by that ``(uid, gid)``. Directories that already exist
    keep their mode and owner. An empty path opens ``dir_fd``'s directory
    again. Raises :class:`UnsafePathError` if a component is a link or not a
    directory, :class:`FileNotFoundError` if one is missing and ``create`` is
    not given. The caller closes the returned descriptor.
    """
    parts = components(relative)
    fd = os.open(".", _DIR_FLAGS, dir_fd=dir_fd)
    for index, name in enumerate(parts):
        try:
            child, _ = _open_child_dir(fd, name, "/".join(parts[: index + 1]), create, owner)
        finally:
            os.close(fd)
        fd = child
    return fd


def _open_child_dir(dir_fd: int, name: str, shown: str, create: int | None,
                    owner: tuple[int, int] | None) -> tuple[int, bool]:
    """Open one directory component, making it first if asked to and missing; and whether it was made."""
    made: int | None = None
    if create is not None:
        try:
            os.mkdir(name, create, dir_fd=dir_fd)
            made = create
        except FileExistsError:
            pass
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in _LINK_ERRNOS:
            raise _explain(dir_fd, name, shown, "a directory") from None
        raise
    if made is not None:
        # Set through the descriptor, opened without following: mkdir's mode went through the umask.
        try:
            set_mode(fd, made, owner)
        except BaseException:
            os.close(fd)
            raise
    return fd, made is not None


def make_dir(dir_fd: int, name: str, mode: int, owner: tuple[int, int] | None = None) -> int:
    """Open the directory ``name`` directly in ``dir_fd`` without following a link, made if missing;
    it ends with exactly ``mode`` and, if given, ``owner``, whether it was made or already there.

    A directory this call makes gets them once; an existing one only if it
    differs (each change is a journalled write of the inode). Raises
    :class:`UnsafePathError` if ``name`` is a link or not a directory. The
    caller closes the returned descriptor.
    """
    if name in ("", ".", "..") or "/" in name:
        raise UnsafePathError(name, "not a directory name (a single path component is needed)")
    fd, made = _open_child_dir(dir_fd, name, name, mode, owner)
    if made:
        return fd
    try:
        status = os.fstat(fd)
        if status.st_mode & 0o7777 != mode or (owner is not None and (status.st_uid, status.st_gid) != owner):
            set_mode(fd, mode, owner)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def safe_root(path: Path | str) -> Iterator[int]:
    """:func:`open_root` in a ``with``: the descriptor is closed on leaving it."""
    fd = open_root(path)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def open_beneath(dir_fd: int, relative: str | PurePosixPath, *, create: int | None = None,
                 owner: tuple[int, int] | None = None) -> Iterator[int]:
    """:func:`open_dir` in a ``with``: the descriptor is closed on leaving it."""
    fd = open_dir(dir_fd, relative, create=create, owner=owner)
    try:
        yield fd
    finally:
        os.close(fd)


def open_file(dir_fd: int, name: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """Open or create the file ``name`` directly in ``dir_fd`` without following a link.

    ``flags`` are ``os.open`` flags (``O_NOFOLLOW`` and ``O_CLOEXEC`` are
    added); ``mode`` applies to a file this call creates, through the umask
    as usual (set it exactly with :func:`set_mode`). The opened file must be
    a regular file: a FIFO or device a task planted is refused without
    blocking on it. The caller closes the returned descriptor.
    """
    if name in ("", ".", "..") or "/" in name:
        raise UnsafePathError(name, "not a file name (a single path component is needed)")
    try:
        fd = _open_existing(dir_fd, name, flags) if not flags & os.O_CREAT else \
            os.open(name, flags | _FILE_FLAGS | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    except OSError as err:
        if err.errno in _LINK_ERRNOS:
            raise _explain(dir_fd, name, name, "a regular file") from None
        if err.errno in (errno.EISDIR, errno.ENXIO):
            raise UnsafePathError(name, "not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePathError(name, "not a regular file")
        if not flags & os.O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_existing(dir_fd: int, name: str, flags: int) -> int:
    """Open the existing regular file ``name`` of ``dir_fd``, looked at first through an ``O_PATH`` descriptor.

    Opening a device runs its driver's ``open`` as root: a task that can make one (root in a container,
    where ``mknod`` is a default capability) plants a node of a host device (a watchdog that then reboots
    the host, a tape that rewinds, a tty that becomes the agent's controlling terminal: no ``O_NOCTTY``),
    outside its container's device rules, and ``O_NONBLOCK`` does not stop that, only a FIFO's wait. An
    ``O_PATH`` descriptor opens nothing; the file is reopened through it (``/proc/self/fd``, the same
    inode whatever the name is swapped for meanwhile) only once it is seen to be a regular file, as
    :func:`herder.supervisor.logfiles.open_log_file` does for log files. (``O_CREAT`` callers use
    ``O_EXCL``, which never opens what is there.)
    """
    handle = os.open(name, os.O_PATH | _FILE_FLAGS, dir_fd=dir_fd)
    try:
        found = os.fstat(handle).st_mode
        if stat.S_ISLNK(found):
            raise OSError(errno.ELOOP, "a link", name)
        if not stat.S_ISREG(found):
            raise UnsafePathError(name, "not a regular file")
        return os.open(f"/proc/self/fd/{handle}", (flags | os.O_CLOEXEC | os.O_NONBLOCK) & ~os.O_NOFOLLOW)
    finally:
        os.close(handle)


def read_file(dir_fd: int, relative: str | PurePosixPath, *, limit: int) -> bytes:
    """The content of the regular file ``relative`` beneath ``dir_fd``, no link followed.

    A task may have written the file, so it is bounded before it is read: a
    file whose size (``fstat`` of the opened descriptor) is over ``limit``
    bytes raises :class:`ValueError` unread, and one that grows meanwhile is
    read ``limit + 1`` bytes at most and refused too.
    """
    parts = components(relative)
    if not parts:
        raise UnsafePathError(str(relative), "not a file name")
    shown = "/".join(parts)
    too_large = ValueError(f"{shown}: larger than the limit of {limit} bytes")
    with open_beneath(dir_fd, "/".join(parts[:-1])) as parent:
        try:
            fd = open_file(parent, parts[-1])
        except UnsafePathError as err:
            raise UnsafePathError(shown, err.reason) from None
        with os.fdopen(fd, "rb") as file:
            if os.fstat(fd).st_size > limit:
                raise too_large
            data = file.read(limit + 1)
    if len(data) > limit:
        raise too_large
    return data


def set_mode(fd: int, mode: int, owner: tuple[int, int] | None = None) -> None:
    """Set an open file's owner (``(uid, gid)``, if given) and then its mode, through the descriptor.

    The owner is set first because changing it clears setuid and setgid bits.
    """
    if owner is not None:
        os.fchown(fd, *owner)
    os.fchmod(fd, mode)


def give_tree(root: Path | str, owner: tuple[int, int]) -> None:
    """Give ``root`` and everything in it to ``owner`` (``(uid, gid)``): a task's own directory, to the
    user the task runs as.

    The task can write this tree (on a restart, it already did): a directory
    swapped for a link while it is walked must not lead root's ``chown`` out of
    it. :func:`os.fwalk` opens each directory relative to its parent's
    descriptor and checks it is the one listed; each entry is changed relative
    to that descriptor, never through a path, and a link itself, not its target.
    A file with more than one name is left as it is: its other name may be a
    host file's (a hard link the task made where the kernel allows it).
    """
    os.chown(root, *owner, follow_symlinks=False)
    for _, dirs, files, dir_fd in os.fwalk(root):
        for name in (*dirs, *files):
            with suppress(FileNotFoundError):  # removed by the task meanwhile
                found = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISDIR(found.st_mode) or found.st_nlink == 1:
                    os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)


def write_atomic(dir_fd: int, name: str, data: bytes, *, mode: int = 0o600,
                 owner: tuple[int, int] | None = None) -> None:
    """Replace (or create) the file ``name`` in ``dir_fd`` with ``data``, all at once.

    The data goes to a new file with a random name in the same directory,
    created with ``O_EXCL`` (so never through a link), given ``mode`` and
    ``owner``, written and synced, then renamed over ``name`` within the
    directory. A reader sees the old content or the new, never a part. A link
    at ``name`` is replaced, not followed; a directory there is an
    :class:`UnsafePathError`.
    """
    if name in ("", ".", "..") or "/" in name:
        raise UnsafePathError(name, "not a file name (a single path component is needed)")
    temp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = open_file(dir_fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            set_mode(fd, mode, owner)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except IsADirectoryError:
            raise UnsafePathError(name, "a directory, where a file is to be written") from None
    except BaseException:
        _unlink_quietly(dir_fd, temp)
        raise
    os.fsync(dir_fd)


def publish_once(dir_fd: int, name: str, data: bytes, *, mode: int = 0o600) -> bool:
    """Create the file ``name`` in ``dir_fd`` with ``data``, unless it exists: False then.

    As :func:`write_atomic`, the data is written and synced under a random name first, but then
    hard-linked into place, which fails where ``name`` exists (a file, a link, anything): so a
    reader never sees a part of the file, and of two processes making it at once, the first
    one's stays and the second learns it lost (it reads the file then).
    """
    if name in ("", ".", "..") or "/" in name:
        raise UnsafePathError(name, "not a file name (a single path component is needed)")
    temp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = open_file(dir_fd, temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            set_mode(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    finally:
        _unlink_quietly(dir_fd, temp)
    os.fsync(dir_fd)
    return True


def _unlink_quietly(dir_fd: int, name: str) -> None:
    """Remove a temporary file this module made, if it is still there."""
    with suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


REMOVE_DEPTH = 64
"""How deep :func:`remove_tree` descends, one open descriptor per level, before it moves what is
deeper up to the tree's top directory to remove it from there."""


def remove_tree(dir_fd: int, name: str) -> None:
    """Remove ``name`` in ``dir_fd`` and everything beneath it, following no link (nothing if it is not there).

    Every directory is opened relative to its parent's descriptor with
    ``O_DIRECTORY | O_NOFOLLOW``: a link is removed as a name and never
    followed, even one swapped in for a directory during the removal (that is
    an :class:`UnsafePathError`, and what is left stays), and nothing else (a
    FIFO, a device) is ever opened. A tree nested deeper than
    :data:`REMOVE_DEPTH` costs no more descriptors: what is deeper is renamed
    up into the tree's top directory and removed from there. Mount points are
    not detected: the caller makes sure nothing is mounted in the tree.
    """
    if name in ("", ".", "..") or "/" in name:
        raise UnsafePathError(name, "not a name (a single path component is needed)")
    if _remove_entry(dir_fd, name):
        return
    try:
        top = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    except OSError as err:
        if err.errno in _LINK_ERRNOS:
            raise _explain(dir_fd, name, name, "a directory") from None
        raise
    try:
        pending = os.listdir(top)
        while pending:
            _remove_beneath(top, pending.pop(), top, pending, name, 1)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=dir_fd)


def _remove_entry(dir_fd: int, name: str) -> bool:
    """Unlink ``name`` unless it is a directory (a link is not one); whether it is gone."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return True
    except (IsADirectoryError, PermissionError):  # Linux says EISDIR for a directory, POSIX EPERM
        try:
            if stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode):
                return False
        except FileNotFoundError:
            return True
        raise
    return True


def _remove_beneath(parent: int, name: str, top: int, pending: list[str], shown: str, depth: int) -> None:
    """Remove ``name`` in ``parent`` (a directory ``depth`` levels below ``top``) with what it holds;
    what lies :data:`REMOVE_DEPTH` levels down is renamed into ``top`` and added to ``pending``."""
    if _remove_entry(parent, name):
        return
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as err:
        if err.errno in _LINK_ERRNOS:
            raise _explain(parent, name, f"{shown}/.../{name}", "a directory") from None
        raise
    try:
        for child in os.listdir(fd):
            if depth < REMOVE_DEPTH:
                _remove_beneath(fd, child, top, pending, shown, depth + 1)
            else:
                moved = f".removing-{secrets.token_hex(8)}"
                os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=top)
                pending.append(moved)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)
