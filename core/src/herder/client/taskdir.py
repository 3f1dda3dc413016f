"""Allocation and task directories on the host, and who owns them.

Under the data dir::

    allocs/<alloc_id>/alloc/{data,logs,tmp}      shared by the group's tasks
    allocs/<alloc_id>/<task>/{local,secrets,tmp}  one per task; secrets is 0700

Inside isolating drivers these appear as ``/alloc``, ``/local`` and
``/secrets``. Nomad also gives each task directory an ``alloc`` entry showing
the shared directory; herder does not create one on the host (isolating
drivers mount the shared directory themselves), but job-file paths may still
reach it as ``alloc/...``: see :func:`herder.sdk.paths.locate_in_task_dir`.

Tasks write into these directories, and an allocation restored after herder
restarted may find a link where a directory was: every directory here is
made and opened through :mod:`herder.sdk.safefs`, so a link is refused
(:class:`~herder.sdk.UnsafePathError`, naming it), never followed.

Modes: ``alloc/data`` and ``alloc/tmp`` are 1777 like ``/tmp``, so the
group's tasks can write them whatever user each runs as, but not remove
each other's files; ``alloc/logs`` is herder's (0755). A task's ``local``
(0755), ``secrets`` (0700) and ``tmp`` (1777) belong to the task's user when
it has one this host knows. ``allocs`` is 0711: not listable by other users
even where the data dir must be traversable
(:func:`herder.sdk.paths.allow_traversal`). Each allocation directory is
0700, made 0711 only for an allocation whose own process needs it: once the
data dir is traversable, its alloc id (in any ``ps`` of a task given
``$NOMAD_TASK_DIR/...``) would otherwise let every user of the host, and
every task of another allocation, read its logs and ``local`` files.

An allocation directory is removed (:func:`remove_alloc_dir`, by the garbage
collector) through directory descriptors too (:func:`~herder.sdk.safefs.remove_tree`):
a link a task left is removed, never followed. Nothing may be mounted in it,
or the removal would go on through the mount.
"""

from __future__ import annotations

import os
import pwd
import re
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from herder.context import TaskDir
from herder.errors import ConfigError
from herder.sdk.paths import ALLOC_SHARED, TRAVERSABLE_DATA_DIR_MODE
from herder.sdk.safefs import UnsafePathError, make_dir, open_beneath, remove_tree, safe_root

Owner = tuple[int, int]
"""A ``(uid, gid)``."""

DATA_DIR_MODE = 0o700
ALLOCS_MODE = 0o711
ALLOC_DIR_MODE = 0o700
SHARED_DIRS = {"data": 0o1777, "logs": 0o755, "tmp": 0o1777}
TASK_DIRS = {"local": 0o755, "secrets": 0o700, "tmp": 0o1777}


def task_owner(user: str) -> Owner | None:
    """The owner herder gives a task's own files: its ``user``'s uid and primary gid.

    None when the task names no user, when this host does not know it (a
    docker task's user is the image's, not the host's) and when herder is
    not root (it could not give files away).
    """
    if not user or os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def make_data_dir(data_dir: Path) -> None:
    """Create the data dir 0700 (its parents as usual); an existing one is made 0700 unless 0700 or 0711.

    0711 is kept: :func:`~herder.sdk.paths.allow_traversal` set it for a task's process that
    needs it, and a restored allocation may still run one.

    :raises ConfigError: the data dir, or a directory above it, is another user's or open to others'
        writes: whoever can write there can swap the state (and so the jobs herder runs) or the token.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    with safe_root(data_dir) as fd:
        status = os.fstat(fd)
        # A data dir under a shared directory (/tmp) may have been made first by another user, to whom
        # a chmod leaves it: they could then replace state.db, or agent.token, between two starts.
        _check_owned(data_dir, status, mode=False)
        for parent in data_dir.absolute().parents:
            _check_owned(parent, os.stat(parent))
        if status.st_mode & 0o7777 not in (DATA_DIR_MODE, TRAVERSABLE_DATA_DIR_MODE):
            os.fchmod(fd, DATA_DIR_MODE)


def _check_owned(path: Path, status: os.stat_result, *, mode: bool = True) -> None:
    """Refuse a directory that a user other than root and this process's owns, or (with ``mode``) may
    write: a sticky one, as /tmp, is shared safely, as others cannot rename what they do not own."""
    if status.st_uid not in (0, os.geteuid()):
        raise ConfigError(f"{path}: owned by uid {status.st_uid}, not by root or this process's user; "
                          "choose a data dir that only root can change")
    if mode and status.st_mode & 0o002 and not status.st_mode & stat.S_ISVTX:
        raise ConfigError(f"{path}: writable by others (mode {status.st_mode & 0o7777:o}); "
                          "choose a data dir that only root can change")


def alloc_dir_path(data_dir: Path, alloc_id: str) -> Path:
    """Where ``allocs/<alloc_id>`` is, without creating or checking anything there."""
    if alloc_id in ("", ".", "..") or "/" in alloc_id:
        raise ValueError(f"invalid allocation id for a directory: {alloc_id!r}")
    return data_dir / "allocs" / alloc_id


def task_dir_paths(alloc_dir_root: Path, task_name: str) -> TaskDir:
    """Where a task's directories are in an allocation directory, without creating or checking anything there."""
    if task_name in ("", ".", "..", ALLOC_SHARED) or "/" in task_name:
        raise ValueError(f"invalid task name for a directory: {task_name!r}")
    shared = alloc_dir_root / ALLOC_SHARED
    return TaskDir(
        dir=alloc_dir_root / task_name,
        local_dir=alloc_dir_root / task_name / "local",
        secrets_dir=alloc_dir_root / task_name / "secrets",
        tmp_dir=alloc_dir_root / task_name / "tmp",
        alloc_dir=shared,
        logs_dir=shared / "logs",
    )


def build_alloc_dir(data_dir: Path, alloc_id: str) -> Path:
    """Create ``allocs/<alloc_id>`` with its shared ``alloc/{data,logs,tmp}``; return it.

    :raises UnsafePathError: a link or a file where one of these directories should be.
    """
    root = alloc_dir_path(data_dir, alloc_id)
    shared = root / ALLOC_SHARED
    with (safe_root(data_dir) as data,
          _directory(data, data_dir, "allocs", ALLOCS_MODE) as allocs,
          _directory(allocs, root.parent, alloc_id, ALLOC_DIR_MODE) as alloc,
          _directory(alloc, root, ALLOC_SHARED, 0o755) as shared_fd):
        for name, mode in SHARED_DIRS.items():
            with _directory(shared_fd, shared, name, mode):
                pass
    return root


def remove_alloc_dir(data_dir: Path, alloc_id: str, mounts: Sequence[Path] | None = None) -> None:
    """Remove ``allocs/<alloc_id>`` and everything in it, following no link (nothing if it is not there).

    ``mounts`` are the mount points in ``allocs``, if the caller has read them
    (:func:`mounts_beneath`) for several removals; else they are read here.

    :raises UnsafePathError: something is mounted in it (nothing is removed),
        or a directory in it was swapped for a link during the removal.
    :raises OSError: the removal failed part way.
    """
    root = Path(os.path.realpath(alloc_dir_path(data_dir, alloc_id)))
    if mounts is None:
        mounts = mounts_beneath(root)
    mounted = [point for point in mounts if point == root or root in point.parents]
    if mounted:
        raise UnsafePathError(str(mounted[0]), "a mount point in an allocation directory; nothing of it is removed")
    with safe_root(data_dir) as data:
        try:
            with open_beneath(data, "allocs") as allocs:
                remove_tree(allocs, alloc_id)
        except FileNotFoundError:  # no allocation directory was ever made
            pass


def move_alloc_data(data_dir: Path, previous: str, alloc_id: str) -> None:
    """Move ``alloc/data`` of allocation ``previous`` into allocation ``alloc_id`` in place of its
    empty one: a rename within the data dir, through directory descriptors, following no link.
    The previous allocation's tasks are dead: nothing writes there any more.

    :raises UnsafePathError: a link, or anything but a directory, where either allocation's
        ``alloc`` or the previous ``alloc/data`` should be; nothing is moved.
    :raises FileNotFoundError: the previous allocation's directories are gone.
    :raises OSError: the replacement's ``alloc/data`` is not empty, or the rename failed (the
        previous one is a mount point, say).
    """
    with (safe_root(data_dir) as data,
          open_beneath(data, f"allocs/{previous}/{ALLOC_SHARED}") as source,
          open_beneath(data, f"allocs/{alloc_id}/{ALLOC_SHARED}") as target):
        if not stat.S_ISDIR(os.stat("data", dir_fd=source, follow_symlinks=False).st_mode):
            where = alloc_dir_path(data_dir, previous) / ALLOC_SHARED / "data"
            raise UnsafePathError(str(where), "not a directory (a task left something else there)")
        os.rmdir("data", dir_fd=target)
        try:
            os.rename("data", "data", src_dir_fd=source, dst_dir_fd=target)
        except OSError:
            os.close(make_dir(target, "data", SHARED_DIRS["data"]))  # it starts with an empty one after all
            raise
        # Its mode and owner as a new one's: root in a container (root over its alloc dir) made it
        # 0700, another user's, or dropped its sticky bit, and the replacement, a new version's
        # tasks of other users maybe, was given it so.
        os.close(make_dir(target, "data", SHARED_DIRS["data"], (os.geteuid(), os.getegid())))


def mounts_beneath(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> list[Path]:
    """The mount points at or below ``path`` (with no link in it) in this process's mount namespace."""
    found: list[Path] = []
    for line in mountinfo.read_text().splitlines():
        fields = line.split(" ")
        if len(fields) > 4:
            # The kernel writes a space, tab, newline or backslash in a path as an octal escape.
            point = Path(re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), fields[4]))
            if point == path or path in point.parents:
                found.append(point)
    return found


def build_task_dir(alloc_dir_root: Path, task_name: str, owner: Owner | None = None) -> TaskDir:
    """Create ``<task>/{local,secrets,tmp}`` in an allocation directory.

    ``alloc_dir_root`` is what :func:`build_alloc_dir` returned; ``owner``
    (see :func:`task_owner`) is given the three directories. Their modes are
    set again on existing directories: a task may have changed them.

    :raises UnsafePathError: a link or a file where one of these directories should be.
    """
    task_dir = task_dir_paths(alloc_dir_root, task_name)
    with safe_root(alloc_dir_root) as alloc, _directory(alloc, alloc_dir_root, task_name, 0o755) as task:
        for name, mode in TASK_DIRS.items():
            with _directory(task, task_dir.dir, name, mode, owner):
                pass
    return task_dir


@contextmanager
def _directory(parent: int, where: Path, name: str, mode: int, owner: Owner | None = None) -> Iterator[int]:
    """Open the directory ``name`` in ``parent`` (the directory at ``where``), made if missing, with
    ``mode`` and ``owner`` even if it existed (:func:`~herder.sdk.safefs.make_dir`: one ``mkdir``,
    ``open`` and ``fchmod`` for a new one, the most common case). Errors name the whole host path."""
    try:
        fd = make_dir(parent, name, mode, owner)
    except UnsafePathError as exc:
        raise UnsafePathError(str(where / exc.path), exc.reason) from None
    try:
        yield fd
    finally:
        os.close(fd)
