"""A group's ``volume`` blocks and its tasks' ``volume_mount`` blocks, as Nomad's host volumes.

A group asks the node for a host volume by the name the client configuration
gives it (``source``); its tasks mount it by the group's name for it. herder
has no CSI: a ``csi`` volume is refused, naming it. A task may mount a volume
only where its driver says it can (``herder_driver_capabilities``); that is
checked once the drivers are known (:func:`mount_problems`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from typing import Any

from herder.jobspec.paths import Locator, Path
from herder.model import Job, VolumeMount, VolumeRequest

Problem = Callable[[Path, str], None]

_READER_ONLY = "-reader-only"
"""The access modes (``single-node-reader-only``, ...) that mount a volume read-only."""


def group_volumes(specs: list[dict[str, Any]], path: Path, problem: Problem) -> tuple[VolumeRequest, ...]:
    """The group's volumes (``specs``: its ``volumes`` list, at ``path``)."""
    volumes: list[VolumeRequest] = []
    seen: set[str] = set()
    for index, spec in enumerate(specs):
        where: Path = (*path, index)
        name = spec["name"]
        if name in seen:
            problem((*where, "name"), f"duplicate volume name {name!r}")
        seen.add(name)
        kind = spec.get("type", "host")
        if kind != "host":
            problem((*where, "type"), f"volume {name!r} is a {kind} volume: herder has no CSI, only host volumes "
                                      "the client configuration declares ([client.host_volume.NAME])")
        if spec.get("attachment_mode", "file-system") != "file-system":
            problem((*where, "attachment_mode"), f"volume {name!r}: a host volume is mounted as a file system")
        for key in ("mount_options", "sticky"):
            if key in spec and kind == "host":
                problem((*where, key), f"volume {name!r}: {key} is for CSI volumes")
        access_mode = spec.get("access_mode", "")
        volumes.append(VolumeRequest(
            name=name, source=spec["source"], type=kind,
            read_only=spec.get("read_only", False) or access_mode.endswith(_READER_ONLY),
            access_mode=access_mode, attachment_mode=spec.get("attachment_mode", ""),
            per_alloc=spec.get("per_alloc", False)))
    return tuple(volumes)


def task_mounts(specs: list[dict[str, Any]], path: Path, volumes: set[str],
                problem: Problem) -> tuple[VolumeMount, ...]:
    """A task's volume mounts (``specs``: its ``volume_mounts`` list, at ``path``); each names one of the
    group's ``volumes`` and an absolute destination, each destination once."""
    mounts: list[VolumeMount] = []
    destinations: set[str] = set()
    for index, spec in enumerate(specs):
        where: Path = (*path, index)
        volume, destination = spec["volume"], spec["destination"]
        if volume not in volumes:
            known = ", ".join(sorted(volumes)) or "none"
            problem((*where, "volume"), f"names no volume of the group ({known})")
        # Checked as written, ``${...}`` included: the drivers get the destination as it is (herder does
        # not interpolate it), so "/x${y}/.." would be the container's root.
        normal = posixpath.normpath(destination)
        if "\0" in destination:  # no path has one: runc and Docker fail the start with no word of why
            problem((*where, "destination"), f"{destination!r} has a NUL byte")
        elif not destination.startswith("/") or normal == "/":
            problem((*where, "destination"), f"{destination!r} must be an absolute path other than /")
        elif normal in destinations:
            problem((*where, "destination"), f"{destination!r} is mounted twice")
        destinations.add(normal)
        mounts.append(VolumeMount(volume=volume, destination=destination, read_only=spec.get("read_only", False),
                                  propagation_mode=spec.get("propagation_mode", "private")))
    return tuple(mounts)


def mount_problems(job: Job, can_mount: Callable[[str], bool]) -> list[str]:
    """Each task that mounts a volume with a driver that cannot (``can_mount(driver)`` false), by path."""
    locator = Locator(job.source, job.lines)
    errors: list[str] = []
    for group_index, group in enumerate(job.groups):
        for task_index, task in enumerate(group.tasks):
            if task.volume_mounts and not can_mount(task.driver):
                errors.append(locator.format(
                    ("job", "groups", group_index, "tasks", task_index, "volume_mounts"),
                    f"driver {task.driver!r} cannot mount host volumes (those that can: docker, exec, "
                    "isolated java, and drivers that declare it)"))
    return errors
