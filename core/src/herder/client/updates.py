"""What an update of a job does to a group's allocations, as Nomad's scheduler decides it.

An allocation of an old version is either left as it is (``ignore``: its
group did not change, but for ``count``), updated in place to the new
version (``inplace``: nothing its tasks run with changed, only what herder
does around them: services, checks, tags, the ``update``, ``reschedule`` and
``restart`` blocks, kill timeouts...), or replaced (``destructive``): the
rules of ``tasksUpdated`` in Nomad's ``scheduler/util.go``. A change of
``count`` alone is no update of the allocations: the scheduler places or
stops indexes beside them.

Pure functions over two versions of a job: no state, no side effect.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from herder.model import Group, Job, Task

UpdateKind = Literal["ignore", "inplace", "destructive"]


@dataclass(frozen=True)
class GroupUpdate:
    """What happens to an allocation of a group: its kind, and for a destructive one the
    first difference that makes it so (``task env``, with the task's name)."""

    kind: UpdateKind
    reason: str = ""


def group_update(old: Job, new: Job, name: str) -> GroupUpdate:
    """What moving an allocation of group ``name`` from ``old`` to ``new`` takes: destructive
    when the group is gone or one of its tasks would run differently, in place when anything
    else of it differs (its ``count`` aside), ignore when nothing does."""
    before = next((g for g in old.groups if g.name == name), None)
    after = next((g for g in new.groups if g.name == name), None)
    if before is None or after is None:
        return GroupUpdate("destructive", "group added" if before is None else "group removed")
    reason = _destructive(old, before, new, after)
    if reason:
        return GroupUpdate("destructive", reason)
    if replace(before, count=0) == replace(after, count=0):
        return GroupUpdate("ignore")
    return GroupUpdate("inplace")


def _destructive(old: Job, before: Group, new: Job, after: Group) -> str:
    """The first difference that makes replacing an allocation necessary, or "" for none."""
    if len(before.tasks) != len(after.tasks):
        return f"number of tasks ({len(before.tasks)} -> {len(after.tasks)})"
    if before.ports != after.ports:
        return "group network"
    tasks = {task.name: task for task in after.tasks}
    for task in before.tasks:
        other = tasks.get(task.name)
        if other is None:
            return f"task {task.name} removed"
        reason = _task_destructive(task, other)
        if reason:
            return f"task {task.name}: {reason}"
        if _meta(old, before, task) != _meta(new, after, other):
            return f"task {task.name}: meta"
    return ""


def _task_destructive(task: Task, other: Task) -> str:
    """What of a task makes it restart (Nomad's per-task rules), or ""."""
    for field in ("driver", "user", "config", "env", "artifacts", "templates"):
        if getattr(task, field) != getattr(other, field):
            return field
    if task.resources != other.resources:
        return "resources"
    return ""


def _meta(job: Job, group: Group, task: Task) -> dict[str, str]:
    """A task's meta as its environment sees it (the job's, its group's and its own: Nomad's combined meta)."""
    return {**job.meta, **group.meta, **task.meta}
