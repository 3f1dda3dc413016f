"""A dispatched job's payload, written for each task that asks for it (``dispatch_payload { file }``).

As Nomad's dispatch hook: in prestart, before artifacts and templates, the
payload goes to ``local/<file>`` of each task with a ``dispatch_payload``. A
child dispatched without a payload gets no file, as in Nomad (its hook writes
nothing for an empty payload): a task tells "no payload" from "an empty one"
by the file's absence.

The task can write its ``local`` directory, and a task restarted finds what its
earlier run left there. The file is written through :mod:`herder.sdk.safefs`,
relative to the task directory's descriptor: a link planted on the way
(``local`` itself, a directory of ``file``, the file) is refused and named in
the task's ``Setup Failure`` event, never followed. ``file`` itself cannot
leave ``local/``: the job is refused when loaded (``..`` or an absolute path).
"""

from __future__ import annotations

import os
from pathlib import Path

from herder import hookimpl
from herder.client.hooks.host import Host
from herder.client.taskdir import task_owner
from herder.context import TaskContext
from herder.errors import HerderError
from herder.model import Task
from herder.sdk.safefs import UnsafePathError, open_beneath, safe_root, write_atomic

PAYLOAD_MODE = 0o644


class PayloadError(HerderError):
    """The payload cannot be written where the task's ``dispatch_payload`` says."""


class PayloadPlugin:
    """Writes the payload of the job of each task's allocation into the task's ``local/``."""

    name = "dispatch_payload"

    def __init__(self, host: Host) -> None:
        self.host = host

    def start(self) -> None:
        """Nothing runs in the background."""

    def close(self) -> None:
        """Nothing to let go of."""

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        if not task.dispatch_payload:
            return
        alloc = self.host.alloc(ctx.alloc_id)
        if alloc is None or not alloc.job.payload:
            return
        write_payload(ctx.task_dir.dir, task.dispatch_payload, alloc.job.payload, task_owner(task.user))


def write_payload(task_dir: Path, file: str, payload: bytes,
                  owner: tuple[int, int] | None) -> None:
    """Write ``payload`` to ``local/<file>`` beneath ``task_dir``, replacing the file
    at once; directories on the way are made 0755, and the file and they belong
    to ``owner`` (the task's user) or, without one, to the owner of ``local``, so
    that a task run as another user than herder's (exec's ``nobody``) reads it.

    :raises PayloadError: a link or something not a directory is in the way.
    """
    directory, _, name = f"local/{file}".rpartition("/")
    try:
        with safe_root(task_dir) as root:
            if owner is None and os.geteuid() == 0:
                with open_beneath(root, "local") as local:
                    info = os.fstat(local)
                    owner = info.st_uid, info.st_gid
            with open_beneath(root, directory, create=0o755, owner=owner) as fd:
                write_atomic(fd, name, payload, mode=PAYLOAD_MODE, owner=owner)
    except (UnsafePathError, FileNotFoundError, NotADirectoryError) as exc:
        raise PayloadError(f"dispatch payload local/{file}: {exc}") from None
