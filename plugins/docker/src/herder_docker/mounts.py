"""The host volumes herder hands a task (``ctx.mounts``, its ``volume_mount`` blocks) as Docker bind mounts."""

from __future__ import annotations

import docker.types

from herder import HostMount

PROPAGATION = {"private": "rprivate", "host-to-task": "rslave", "bidirectional": "rshared"}
"""Nomad's ``propagation_mode`` as Docker's bind propagation (Nomad's docker driver maps them so)."""


def host_volume_mounts(mounts: list[HostMount]) -> list[docker.types.Mount]:
    """One bind mount per host volume; the source is the path herder prepared, used as it is.

    A read-only one is bound without what is mounted inside it on the host: Docker makes only the
    top of a bind read-only (before API 1.44), so the task could write into those mounts.
    """
    binds = []
    for mount in mounts:
        bind = docker.types.Mount(target=mount.destination, source=str(mount.source), type="bind",
                                  read_only=mount.read_only,
                                  propagation=PROPAGATION.get(mount.propagation, "rprivate"))
        if mount.read_only:
            bind["BindOptions"]["NonRecursive"] = True
        binds.append(bind)
    return binds
