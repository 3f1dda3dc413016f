"""The host volumes herder hands a task (``ctx.mounts``, its ``volume_mount`` blocks) as OCI bind mounts.

runc resolves each destination inside the container's root filesystem, so a
destination cannot lead out of it; the source is the path herder prepared.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from herder import HostMount

PROPAGATION = {"private": "rprivate", "host-to-task": "rslave", "bidirectional": "rshared"}
"""Nomad's ``propagation_mode`` as mount propagation flags."""


def host_volume_mounts(mounts: Sequence[HostMount]) -> list[dict[str, Any]]:
    """The OCI ``mounts`` entries of ``mounts``: recursive binds, no setuid files or devices.

    A read-only one is read-only all the way down (``rro``): ``ro`` alone covers the top of the bind
    only, not what is mounted inside the volume on the host.
    """
    return [{"destination": mount.destination, "type": "bind", "source": str(mount.source),
             "options": ["rbind", "nosuid", "nodev", *(("ro", "rro") if mount.read_only else ("rw",)),
                         PROPAGATION.get(mount.propagation, "rprivate")]}
            for mount in mounts]
