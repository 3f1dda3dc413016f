"""The task states (``tasks``): one row a task of an allocation, written with it by ``put_alloc``."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from herder.state.records import TaskRecord, TaskState, check_choice
from herder.state.tables.rows import Table, as_params, check_names, columns, decode, dump_optional

_TASK_UPDATABLE = frozenset(f.name for f in fields(TaskRecord)) - {"alloc_id", "name"}


class Tasks(Table):
    """The tasks of the allocations, each with its state, restarts and driver handle."""

    def tasks(self, alloc_id: str) -> list[TaskRecord]:
        """The tasks of an allocation, in the order put_alloc was given them."""
        rows = self._db.query(f"SELECT {columns(TaskRecord)} FROM tasks WHERE alloc_id = ? ORDER BY rowid",
                              (alloc_id,))
        return [_decode_task(row) for row in rows]

    def task(self, alloc_id: str, name: str) -> TaskRecord | None:
        rows = self._db.query(f"SELECT {columns(TaskRecord)} FROM tasks WHERE alloc_id = ? AND name = ?",
                              (alloc_id, name))
        return _decode_task(rows[0]) if rows else None

    def update_task(self, alloc_id: str, name: str, /, *, wait: bool = True, **changes: Any) -> None:
        """Change fields of a task record. TypeError for a name that is not a
        changeable field, KeyError if the task is not stored (with ``wait``;
        else the commit that finds it out logs it)."""
        check_names("update_task", changes, _TASK_UPDATABLE)
        if not changes:
            raise TypeError("update_task() needs a field to change")
        if "state" in changes:
            check_choice("state", changes["state"], TaskState)
        if "handle_state" in changes:
            changes["handle_state"] = dump_optional(changes["handle_state"])
        if "created" in changes:
            changes["created"] = json.dumps(changes["created"])
        self._update("tasks", {"alloc_id": alloc_id, "name": name}, changes, f"no task {name} in alloc {alloc_id}",
                     wait)


def encode_task(task: TaskRecord) -> dict[str, Any]:
    """A task record as the named parameters of its row (``put_alloc`` writes them)."""
    return {**as_params(task), "handle_state": dump_optional(task.handle_state), "created": json.dumps(task.created)}


def _decode_task(row: tuple[Any, ...]) -> TaskRecord:
    values = decode(TaskRecord, row)
    handle_state = values["handle_state"]
    return TaskRecord(**{**values, "failed": bool(values["failed"]),
                         "handle_state": None if handle_state is None else json.loads(handle_state),
                         "created": [(kind, value) for kind, value in json.loads(values["created"])]})
