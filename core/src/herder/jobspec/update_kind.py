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
_TASK_FIELDS = ("driver", "user", "config", "env", "artifacts", "templates", "resources")


def group_update(old: Job, new: Job, group: str) -> UpdateKind:
    """How group ``group``'s allocations of job version ``old`` are updated to version ``new``
    (destructive too when the group is in only one of them)."""
    before = next((g for g in old.groups if g.name == group), None)
    after = next((g for g in new.groups if g.name == group), None)
    if before is None or after is None or _destructive(old, before, new, after):
        return UpdateKind.DESTRUCTIVE
    if before == after:
        return UpdateKind.NONE
    if replace(before, count=0) == replace(after, count=0):
        return UpdateKind.COUNT
    return UpdateKind.IN_PLACE


def _destructive(old: Job, before: Group, new: Job, after: Group) -> bool:
    tasks = {task.name: task for task in after.tasks}
    if len(before.tasks) != len(after.tasks) or tasks.keys() != {task.name for task in before.tasks}:
        return True
    if before.ports != after.ports:  # the group's network
        return True
    for task in before.tasks:
        other = tasks[task.name]
        if any(getattr(task, name) != getattr(other, name) for name in _TASK_FIELDS):
            return True
        if _meta(old, before, task) != _meta(new, after, other):
            return True
    return False


def _meta(job: Job, group: Group, task: Task) -> dict[str, str]:
    """The task's meta as its environment sees it: the job's, the group's, then its own (Nomad's CombinedTaskMeta)."""
    return {**job.meta, **group.meta, **task.meta}
