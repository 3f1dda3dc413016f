"""Job-file paths inside a task directory: never outside it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from herder.context import TaskDir

ALLOC_SHARED = "alloc"
"""The name of the shared allocation directory, and of its view inside each task directory."""


def resolve_in_task_dir(task_dir: TaskDir, relative: str) -> Path:
    """The host path of a job-file path such as an artifact or template destination.

    The path is taken relative to the task directory, as in Nomad. It may
    reach the shared allocation directory, either through the task's
    ``alloc`` view (``alloc/data/x``) or as the sibling it is on the host
    (``../alloc/data/x``). An absolute path is accepted only if it lies in
    one of those two. Symlinks are resolved; anything that ends up outside
    both directories raises :class:`ValueError`.
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
