"""Allocation and task directories on the host.

Under the data dir::

    allocs/<alloc_id>/alloc/{data,logs,tmp}      shared by the group's tasks
    allocs/<alloc_id>/<task>/{local,secrets,tmp}  one per task; secrets is 0700

Inside isolating drivers these appear as ``/alloc``, ``/local`` and
``/secrets``. Nomad also gives each task directory an ``alloc`` entry showing
the shared directory; herder does not create one on the host (isolating
drivers mount the shared directory themselves), but job-file paths may still
reach it as ``alloc/...``: see :func:`herder.sdk.resolve_in_task_dir`.
"""

from __future__ import annotations

import os
from pathlib import Path

from herder.context import TaskDir
from herder.sdk.paths import ALLOC_SHARED


def build_alloc_dir(data_dir: Path, alloc_id: str) -> Path:
    """Create ``allocs/<alloc_id>`` with its shared ``alloc/{data,logs,tmp}``; return it."""
    root = data_dir / "allocs" / alloc_id
    shared = root / ALLOC_SHARED
    for name in ("data", "logs", "tmp"):
        (shared / name).mkdir(parents=True, exist_ok=True)
    return root


def build_task_dir(alloc_dir_root: Path, task_name: str) -> TaskDir:
    """Create ``<task>/{local,secrets,tmp}`` in an allocation directory.

    ``alloc_dir_root`` is what :func:`build_alloc_dir` returned.
    """
    if task_name in ("", ".", "..", ALLOC_SHARED) or "/" in task_name:
        raise ValueError(f"invalid task name for a directory: {task_name!r}")
    shared = alloc_dir_root / ALLOC_SHARED
    task_dir = TaskDir(
        dir=alloc_dir_root / task_name,
        local_dir=alloc_dir_root / task_name / "local",
        secrets_dir=alloc_dir_root / task_name / "secrets",
        tmp_dir=alloc_dir_root / task_name / "tmp",
        alloc_dir=shared,
        logs_dir=shared / "logs",
    )
    for path in (task_dir.local_dir, task_dir.secrets_dir, task_dir.tmp_dir):
        path.mkdir(parents=True, exist_ok=True)
    # mkdir's mode is filtered by the umask, and an existing dir keeps its own.
    os.chmod(task_dir.secrets_dir, 0o700)
    return task_dir
