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
    return _update(_JobChange(old, new), _group(old, group), _group(new, group))


def group_updates(old: Document, new: Document) -> dict[str, UpdateKind]:
    """:func:`group_update` of every group both versions have, by name, in time linear in their size.

    What is the job's (its groups by name, whether its placement changed, which keys of its meta did)
    is worked out once here, not once a group: a group's meta was the job's merged with its own, a
    dictionary the size of the job's meta built for each task of each group, so a job of a thousand
    groups and 60,000 meta entries (a megabyte) took 40 s of a worker thread to plan, and of 4 MiB
    many minutes.
    """
    change = _JobChange(old, new)
    olds, news = _by_name(old.get("groups")), _by_name(new.get("groups"))
    return {name: _update(change, olds[name], news[name]) for name in olds.keys() & news.keys()}


class _JobChange:
    """What changed of a job's own, besides its groups: its placement, and which keys of its meta."""

    def __init__(self, old: Document, new: Document) -> None:
        self.placement = old.get("affinity") != new.get("affinity") or old.get("spread") != new.get("spread")
        self.old_meta, self.new_meta = old.get("meta") or {}, new.get("meta") or {}
        self.meta = [key for key in self.old_meta.keys() | self.new_meta.keys()
                     if self.old_meta.get(key, _UNSET) != self.new_meta.get(key, _UNSET)]

    def meta_changed(self, old_group: Document, new_group: Document, old_task: Document, new_task: Document) -> bool:
        """Whether the task's meta as its environment sees it (the job's, the group's, then its own: Nomad's
        CombinedTaskMeta) changed, without merging the job's: a key the group or the task sets is compared as
        they set it, any other key the job changed changes it."""
        old_own = {**(old_group.get("meta") or {}), **(old_task.get("meta") or {})}
        new_own = {**(new_group.get("meta") or {}), **(new_task.get("meta") or {})}
        own = old_own.keys() | new_own.keys()
        if any(old_own.get(key, self.old_meta.get(key, _UNSET)) != new_own.get(key, self.new_meta.get(key, _UNSET))
               for key in own):
            return True
        return any(key not in own for key in self.meta)  # stops at the first: at most len(own) + 1 looks


_UNSET = object()


def _update(change: _JobChange, old_group: Document, new_group: Document) -> UpdateKind:
    if _destructive(change, old_group, new_group):  # the job's meta and placement count too
        return UpdateKind.DESTRUCTIVE
    if old_group == new_group:
        return UpdateKind.NONE
    if _without(old_group, "count") == _without(new_group, "count"):
        return UpdateKind.COUNT
    return UpdateKind.IN_PLACE


def _destructive(change: _JobChange, old_group: Document, new_group: Document) -> bool:
    old_tasks, new_tasks = _by_name(old_group.get("tasks")), _by_name(new_group.get("tasks"))
    if old_tasks.keys() != new_tasks.keys():
        return True
    if any(old_group.get(key) != new_group.get(key) for key in _GROUP_KEYS):
        return True
    if change.placement:
        return True
    if _connect(old_group) != _connect(new_group):
        return True
    for name, old_task in old_tasks.items():
        new_task = new_tasks[name]
        if any(old_task.get(key) != new_task.get(key) for key in _TASK_KEYS):
            return True
        if change.meta_changed(old_group, new_group, old_task, new_task):
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


def _connect(group: Document) -> list[Any]:
    """The ``connect`` blocks of the group's services, which a task restarts for."""
    return [service.get("connect") for service in group.get("services") or () if isinstance(service, Mapping)]
