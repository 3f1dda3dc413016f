"""Host volumes on this node: whether a job's groups find theirs, and what each task mounts.

The operator declares them (``[client.host_volume.NAME]``); a group asks for
one by that name (its ``volume`` block's ``source``). The path is the
operator's, trusted as written: a link in it is followed, once, when the
allocation is placed, and the driver gets the resolved path. herder never
looks inside a volume, so nothing a task leaves there is followed by herder.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from herder.client.config import HostVolumeConfig
from herder.context import HostMount
from herder.errors import PlacementError
from herder.model import Group, Job, Task

FILTER = "missing compatible host volumes"
"""Nomad's name for the check that filters a node without a group's host volumes."""

MADE_MODE = 0o700
"""A host volume herder makes is root's alone: a container, root in it, may leave a setuid-root
program there (Docker cannot bind with ``nosuid``), which another user of the host could run."""


def missing_host_volumes(job: Job, volumes: Mapping[str, HostVolumeConfig]) -> list[str]:
    """Why this node cannot hold the host volumes ``job`` asks for, one line per volume; empty if it can."""
    return [problem for group in job.groups for problem in group_volume_problems(group, volumes)]


def group_volume_problems(group: Group, volumes: Mapping[str, HostVolumeConfig]) -> list[str]:
    """Why this node cannot hold the host volumes ``group`` asks for, one line per volume.

    As Nomad's ``HostVolumeChecker``: the volume must be declared, and a volume the group may write
    must not be read-only here; herder also wants its path to exist (or ``create`` set).
    """
    declared = ", ".join(sorted(volumes)) or "none"
    problems: list[str] = []
    for request in group.volumes:
        for source in sorted({request.source_for(index) for index in range(group.count)}):
            host = volumes.get(source)
            asked = f"group {group.name!r} volume {request.name!r}: host volume {source!r}"
            if host is None:
                problems.append(f"{FILTER}: {asked} is not on this node (its host volumes: {declared})")
            elif host.read_only and not request.read_only:
                problems.append(f"{FILTER}: {asked} is read-only on this node, and the volume is not "
                                "read_only = true")
            elif not host.create and not os.path.lexists(host.path):
                problems.append(f"{FILTER}: {asked} has no {host.path} (set create = true in "
                                f"[client.host_volume.{source}] to have herder make it)")
    return problems


def planted_link(path: Path) -> Path | None:
    """The first link on ``path`` that the kernel's ``protected_symlinks`` would not let root follow: in
    a sticky directory anyone may write (``/tmp``), owned by neither root nor the directory's owner.
    Resolving the path here (``realpath``) and handing the driver the result would follow it anyway."""
    for component in (*reversed(path.parents), path):
        try:
            link = os.lstat(component)
            if not stat.S_ISLNK(link.st_mode):
                continue
            directory = os.stat(component.parent)
        except OSError:
            return None  # not there (yet): nothing more on the path to follow
        shared = directory.st_mode & stat.S_ISVTX and directory.st_mode & stat.S_IWOTH
        if shared and link.st_uid not in (0, directory.st_uid):
            return component
    return None


def prepare(host: HostVolumeConfig, name: str) -> Path:
    """The host volume's path, made (0700, the agent's user's) if missing and ``create`` says so, with
    the links in it resolved, but for one another user left in ``/tmp`` or the like (:func:`planted_link`).

    :raises PlacementError: it does not exist (and may not be made), cannot be made, or goes through
        another user's link.
    """
    _refuse_planted_link(host.path, name)  # before making anything through it
    if not os.path.lexists(host.path):
        if not host.create:
            raise PlacementError(f"{FILTER}: host volume {name!r} has no {host.path}")
        try:
            host.path.mkdir(mode=MADE_MODE, parents=True, exist_ok=True)
            # mkdir's mode is filtered by the umask; by a descriptor, so a link put there meanwhile is not followed
            fd = os.open(host.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, MADE_MODE)
            finally:
                os.close(fd)
        except OSError as exc:
            raise PlacementError(f"host volume {name!r}: cannot make {host.path}: {exc}") from exc
    _refuse_planted_link(host.path, name)
    return Path(os.path.realpath(host.path))


def _refuse_planted_link(path: Path, name: str) -> None:
    link = planted_link(path)
    if link is not None:
        raise PlacementError(f"host volume {name!r}: {link} is a link of another user in a directory anyone "
                             "may write: not followed")


def task_mounts(group: Group, task: Task, index: int, volumes: Mapping[str, HostVolumeConfig]) -> list[HostMount]:
    """What ``task`` of the allocation ``index`` of ``group`` mounts, each path prepared (:func:`prepare`):
    read-only if the host volume, the group's volume or the mount says so.

    :raises PlacementError: a volume is not on this node, or its path cannot be had.
    """
    requests = {request.name: request for request in group.volumes}
    mounts: list[HostMount] = []
    for mount in task.volume_mounts:
        request = requests[mount.volume]  # the job's validation made sure it is there
        source = request.source_for(index)
        host = volumes.get(source)
        if host is None:
            raise PlacementError(f"{FILTER}: host volume {source!r} is not on this node")
        mounts.append(HostMount(source=prepare(host, source), destination=mount.destination,
                                read_only=host.read_only or request.read_only or mount.read_only,
                                propagation=mount.propagation_mode))
    return mounts
