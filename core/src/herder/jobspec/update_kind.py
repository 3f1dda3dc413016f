"""What a new version of a job does to a group's running allocations, as Nomad's scheduler decides it.

Nomad's ``tasksUpdated`` (``scheduler/util.go``) tells an update its tasks must
restart for (destructive: the allocations are replaced) from one they need not
(in place: the allocations stay, their services, checks and policies change);
a change of ``count`` alone only places or stops allocations. This is that
decision over two versions of a job, pure, so that the plan of the
Nomad-compatible API and the client's deployments decide alike.
"""

from __future__ import annotations

import enum
from dataclasses import replace

from herder.model import Group, Job, Task


class UpdateKind(enum.Enum):
    """How a group's allocations of the old version are updated to the new one."""

    NONE = "none"
    """Nothing of the group changed."""
    COUNT = "count"
    """Only ``count``: allocations are placed or stopped, the others left alone."""
    IN_PLACE = "in-place"
    """A change no task restarts for (services, checks, meta of services, restart, kill timeouts...)."""
    DESTRUCTIVE = "destructive"
    """A change the tasks restart for: the allocations are replaced."""


# What Nomad's tasksUpdated compares of a task: any change of one of these replaces the allocations.
_TASK_FIELDS = ("driver", "user", "config", "env", "artifacts", "templates", "resources", "volume_mounts")


def group_update(old: Job, new: Job, group: str) -> UpdateKind:
    """How group ``group``'s allocations of job version ``old`` are updated to version ``new``
    (destructive too when the group is in only one of them)."""
    before = next((g for g in old.groups if g.name == group), None)
    after = next((g for g in new.groups if g.name == group), None)
    return _update(_JobChange(old, new), before, after)


def group_updates(old: Job, new: Job) -> dict[str, UpdateKind]:
    """:func:`group_update` of every group of ``new``, by name, in time linear in the job's size.

    What is the job's own (which keys of its meta changed) is worked out once, not once a task:
    merging the job's meta into each task's made a job of a thousand groups and 60,000 meta
    entries (a megabyte) take 40 s of a worker thread to plan.
    """
    change = _JobChange(old, new)
    before = {group.name: group for group in old.groups}
    return {group.name: _update(change, before.get(group.name), group) for group in new.groups}


class _JobChange:
    """The two versions of a job, and the keys of the job's meta that changed between them."""

    def __init__(self, old: Job, new: Job) -> None:
        self.old, self.new = old, new
        self.meta = [key for key in old.meta.keys() | new.meta.keys()
                     if old.meta.get(key, _UNSET) != new.meta.get(key, _UNSET)]

    def meta_changed(self, before: Group, task: Task, after: Group, other: Task) -> bool:
        """Whether the task's meta as its environment sees it (the job's, the group's, then its own:
        Nomad's CombinedTaskMeta) changed, without merging the job's: a key the group or the task sets
        is compared as they set it; any other key the job changed changes it."""
        old_own, new_own = {**before.meta, **task.meta}, {**after.meta, **other.meta}
        own = old_own.keys() | new_own.keys()
        if any(old_own.get(key, self.old.meta.get(key, _UNSET)) != new_own.get(key, self.new.meta.get(key, _UNSET))
               for key in own):
            return True
        return any(key not in own for key in self.meta)  # stops at the first: at most len(own) + 1 looks


_UNSET = object()


def _update(change: _JobChange, before: Group | None, after: Group | None) -> UpdateKind:
    if before is None or after is None or _destructive(change, before, after):
        return UpdateKind.DESTRUCTIVE
    if before == after:
        return UpdateKind.NONE
    if replace(before, count=0) == replace(after, count=0):
        return UpdateKind.COUNT
    return UpdateKind.IN_PLACE


def _destructive(change: _JobChange, before: Group, after: Group) -> bool:
    tasks = {task.name: task for task in after.tasks}
    if len(before.tasks) != len(after.tasks) or tasks.keys() != {task.name for task in before.tasks}:
        return True
    if before.ports != after.ports or before.volumes != after.volumes:  # the group's network, its host volumes
        return True
    for task in before.tasks:
        other = tasks[task.name]
        if any(getattr(task, name) != getattr(other, name) for name in _TASK_FIELDS):
            return True
        if change.meta_changed(before, task, after, other):
            return True
    return False
