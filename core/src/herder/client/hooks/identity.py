"""Workload identities: the tokens a task's ``identity`` blocks ask for, as Nomad 1.7's identity hook.

In prestart, before templates (which may read the environment), each identity with ``env`` or
``file`` gets a JWT signed by the client's key (:mod:`herder.client.signing`), whose claims name the
job (its parent for a periodic or dispatched child, as Nomad), the allocation and the task. The
default identity's token is ``NOMAD_TOKEN`` and ``secrets/nomad_token``; another identity's is
``NOMAD_TOKEN_<name>`` and ``secrets/nomad_<name>.jwt``; ``filepath`` puts the file elsewhere in the
task directory. Files are 0600, the task's user's, written through :mod:`herder.sdk.safefs`: a link
the task planted on the way is refused, never followed. A token is signed again at each start of the
task; one with a ``ttl`` is not renewed while the task runs.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from herder import hookimpl
from herder.client.hooks.host import Host
from herder.client.signing import WorkloadClaims
from herder.client.taskdir import task_owner
from herder.context import TaskContext
from herder.errors import HerderError
from herder.model import DEFAULT_IDENTITY, Identity, Job, Task
from herder.sdk.safefs import UnsafePathError, open_beneath, safe_root, write_atomic

NAMESPACE = "default"
"""herder has one namespace, Nomad's default."""
TOKEN_ENV = "NOMAD_TOKEN"


class IdentityError(HerderError):
    """A token cannot be written where the task's ``identity`` says."""


class IdentityPlugin:
    """Signs each task's workload identities and hands them to it."""

    name = "identity"

    def __init__(self, host: Host) -> None:
        self.host = host

    def start(self) -> None:
        """Nothing runs in the background."""

    def close(self) -> None:
        """Nothing to let go of."""

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        handed = [identity for identity in task.identities if identity.env or identity.file]
        alloc = self.host.alloc(ctx.alloc_id)
        if not handed or alloc is None:
            return
        for identity in handed:
            token = self.host.signer.sign(claims(alloc.job, ctx, identity), identity.ttl)
            if identity.env:
                ctx.env[env_name(identity)] = token
            if identity.file:
                write_token(ctx.task_dir.dir, token_path(identity), token, task_owner(task.user))


def claims(job: Job, ctx: TaskContext, identity: Identity) -> WorkloadClaims:
    """Nomad's claims of ``identity`` of the task ``ctx`` runs; ``sub`` is
    ``<region>:<namespace>:<job>:<group>:<task>:<identity>``."""
    job_id = job.parent_id or job.name
    subject = ":".join((job.region, NAMESPACE, job_id, ctx.group_name, ctx.task_name, identity.name))
    return WorkloadClaims(namespace=NAMESPACE, job_id=job_id, alloc_id=ctx.alloc_id, task=ctx.task_name,
                          subject=subject, audience=identity.audience)


def env_name(identity: Identity) -> str:
    return TOKEN_ENV if identity.name == DEFAULT_IDENTITY else f"{TOKEN_ENV}_{identity.name}"


def token_path(identity: Identity) -> str:
    """Where the token goes, relative to the task directory."""
    if identity.filepath:
        return identity.filepath
    return "secrets/nomad_token" if identity.name == DEFAULT_IDENTITY else f"secrets/nomad_{identity.name}.jwt"


def write_token(task_dir: Path, relative: str, token: str, owner: tuple[int, int] | None) -> None:
    """Write ``token`` to ``relative`` beneath ``task_dir`` (whose directory must exist), 0600, owned
    by ``owner`` or, without one, by the owner of that directory.

    :raises IdentityError: a link or something not a directory is in the way, or the directory is missing.
    """
    directory, name = posixpath.split(posixpath.normpath(relative))
    try:
        with safe_root(task_dir) as root, open_beneath(root, directory or ".") as fd:
            if owner is None and os.geteuid() == 0:
                info = os.fstat(fd)
                owner = info.st_uid, info.st_gid
            write_atomic(fd, name, token.encode("ascii"), mode=0o600, owner=owner)
    except (UnsafePathError, FileNotFoundError, NotADirectoryError) as exc:
        raise IdentityError(f"workload identity token {relative}: {exc}") from None
