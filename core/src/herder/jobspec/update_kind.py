"""What a new version of a job does to a group's running allocations, as Nomad's scheduler decides it.

Nomad's ``tasksUpdated`` (``scheduler/util.go``) tells an update its tasks must
restart for (destructive: the allocations are replaced) from one they need not
(in place: the allocations stay, their services, checks and policies change);
a change of ``count`` alone only places or stops allocations. This is that
decision over two canonical job documents (the ``job`` maps), pure, so that the
plan of the Nomad-compatible API and the client's deployments decide alike.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

Document = Mapping[str, Any]
"""A canonical job document's ``job`` map."""


class UpdateKind(enum.Enum):
    """How a group's allocations of the old version are updated to the new one."""

    NONE = "none"
    """Nothing of the group changed."""
    COUNT = "count"
    """Only ``count``: allocations are placed or stopped, the others left alone."""
    IN_PLACE = "in-place"
    """A change no task restarts for (services, checks, meta of services, update, restart, reschedule)."""
    DESTRUCTIVE = "destructive"
    """A change the tasks restart for: the allocations are replaced."""


# What Nomad's tasksUpdated compares, by canonical key: any change of one of these replaces the allocations.
_GROUP_KEYS = ("ephemeral_disk", "network", "affinity", "spread", "consul")
_TASK_KEYS = ("driver", "user", "config", "env", "artifacts", "vault", "templates", "affinity")
_RESOURCE_KEYS = ("cpu", "cores", "memory", "memory_max", "device", "network")


def group_update(old: Document, new: Document, group: str) -> UpdateKind:
    """How group ``group``'s allocations of job version ``old`` are updated to version ``new``
    (both canonical ``job`` maps holding the group)."""
    old_group, new_group = _group(old, group), _group(new, group)
    if _destructive(old, new, old_group, new_group):  # the job's meta and placement count too
        return UpdateKind.DESTRUCTIVE
    if old_group == new_group:
        return UpdateKind.NONE
    if _without(old_group, "count") == _without(new_group, "count"):
        return UpdateKind.COUNT
    return UpdateKind.IN_PLACE


def _destructive(old: Document, new: Document, old_group: Document, new_group: Document) -> bool:
    old_tasks, new_tasks = _by_name(old_group.get("tasks")), _by_name(new_group.get("tasks"))
    if old_tasks.keys() != new_tasks.keys():
        return True
    if any(old_group.get(key) != new_group.get(key) for key in _GROUP_KEYS):
        return True
    if old.get("affinity") != new.get("affinity") or old.get("spread") != new.get("spread"):
        return True
    if _connect(old_group) != _connect(new_group):
        return True
    for name, old_task in old_tasks.items():
        new_task = new_tasks[name]
        if any(old_task.get(key) != new_task.get(key) for key in _TASK_KEYS):
            return True
        if _meta(old, old_group, old_task) != _meta(new, new_group, new_task):
            return True
        old_resources, new_resources = old_task.get("resources") or {}, new_task.get("resources") or {}
        if any(old_resources.get(key) != new_resources.get(key) for key in _RESOURCE_KEYS):
            return True
    return False


def _group(job: Document, name: str) -> Document:
    return _by_name(job.get("groups")).get(name, {})


def _by_name(items: Any) -> dict[str, Document]:
    return {str(item.get("name")): item for item in items or () if isinstance(item, Mapping)}


def _without(group: Document, key: str) -> dict[str, Any]:
    return {k: v for k, v in group.items() if k != key}


def _meta(job: Document, group: Document, task: Document) -> dict[str, Any]:
    """The task's meta as its environment sees it: the job's, the group's, then its own (Nomad's CombinedTaskMeta)."""
    return {**(job.get("meta") or {}), **(group.get("meta") or {}), **(task.get("meta") or {})}


def _connect(group: Document) -> list[Any]:
    """The ``connect`` blocks of the group's services, which a task restarts for."""
    return [service.get("connect") for service in group.get("services") or () if isinstance(service, Mapping)]
