"""Job-file paths inside a task directory: never outside it; and the data dir a task's process passes through."""

from __future__ import annotations

import os
import posixpath
from pathlib import Path, PurePosixPath

from herder.context import TaskDir
from herder.sdk.safefs import open_beneath, safe_root

ALLOC_SHARED = "alloc"
"""The name of the shared allocation directory, and of its view inside each task directory."""
TRAVERSABLE_DATA_DIR_MODE = 0o711
"""The data dir's mode once a task's process must pass through it (it is 0700 until then)."""


def resolve_in_task_dir(task_dir: TaskDir, relative: str) -> Path:
    """The host path of a job-file path such as an artifact or template destination.

    The path is taken relative to the task directory, as in Nomad. It may
    reach the shared allocation directory, either through the task's
    ``alloc`` view (``alloc/data/x``) or as the sibling it is on the host
    (``../alloc/data/x``). An absolute path is accepted only if it lies in
    one of those two. Symlinks are resolved; anything that ends up outside
    both directories raises :class:`ValueError`.

    The answer is a path string, true when it was checked: to open or write
    a file there on the task's behalf, use :func:`locate_in_task_dir` and
    :mod:`herder.sdk.safefs` instead, which the task cannot redirect with a
    link planted after the check.
    """
    path = PurePosixPath(relative)
    if path.parts[:1] == (ALLOC_SHARED,):
        candidate = task_dir.alloc_dir.joinpath(*path.parts[1:])
    else:
        candidate = task_dir.dir / path
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError) as err:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ValueError(f"path {relative!r} cannot be resolved: {err}") from None
    if any(p.is_symlink() for p in (resolved, *resolved.parents)):  # a loop left unresolved (Python >= 3.13)
        raise ValueError(f"path {relative!r} cannot be resolved: symlink loop")
    for root in (task_dir.dir, task_dir.alloc_dir):
        if resolved.is_relative_to(root.resolve()):
            return resolved
    raise ValueError(f"path {relative!r} escapes the task directory")


def locate_in_task_dir(task_dir: TaskDir, relative: str) -> tuple[Path, str]:
    """Where a job-file path is, as a directory herder made and a path beneath it, for :mod:`herder.sdk.safefs`.

    The same paths as :func:`resolve_in_task_dir` are accepted, decided by
    the text alone: ``alloc/x`` and ``../alloc/x`` are ``(alloc_dir, "x")``,
    ``local/x`` is ``(task_dir.dir, "local/x")``, an absolute path inside one
    of the two directories is the rest of it. Nothing is resolved, so a link
    in the path is not followed here but refused when the path is opened.
    Raises :class:`ValueError` for a path that leaves both directories.
    """
    if PurePosixPath(relative).is_absolute():
        absolute = PurePosixPath(posixpath.normpath(relative))
        for root in (task_dir.dir, task_dir.alloc_dir):
            if absolute.is_relative_to(root):
                return root, str(absolute.relative_to(root))
        raise ValueError(f"path {relative!r} escapes the task directory")
    normal = PurePosixPath(posixpath.normpath(relative))
    if normal.parts[:1] == (ALLOC_SHARED,):
        return task_dir.alloc_dir, "/".join(normal.parts[1:])
    if normal.parts[:2] == ("..", ALLOC_SHARED):
        return task_dir.alloc_dir, "/".join(normal.parts[2:])
    if normal.parts[:1] == ("..",):
        raise ValueError(f"path {relative!r} escapes the task directory")
    return task_dir.dir, "/".join(normal.parts)


def allow_traversal(data_dir: Path, alloc_dir: Path | None = None) -> None:
    """Make the data dir 0711, and ``alloc_dir`` in it (the allocation's ``allocs/<id>``): other users
    may pass through them to a path they know, not list them. Other allocations' directories stay 0700.

    Needed by a process that runs as another user of the host than herder's
    on the host's paths (raw_exec, a JVM without isolation): it opens
    ``$NOMAD_TASK_DIR/...`` as that user. :class:`herder.sdk.SupervisedProcess`
    calls it for such a process (``host_paths``). A task whose directories
    are mounted into it (exec, an isolated JVM, docker, rkt) does not need
    it: root makes the mounts, and the task's user never walks the host's
    path to them.
    """
    with safe_root(data_dir) as fd:
        os.fchmod(fd, TRAVERSABLE_DATA_DIR_MODE)
        if alloc_dir is not None:
            with open_beneath(fd, str(alloc_dir.relative_to(data_dir))) as alloc:
                os.fchmod(alloc, TRAVERSABLE_DATA_DIR_MODE)
