"""The tasks' events (``events``): each task's latest :data:`EVENTS_KEPT`, kept with its allocation."""

from __future__ import annotations

import json
from datetime import datetime

from herder.objects import TaskEvent
from herder.state.tables.rows import Table

EVENTS_KEPT = 100
"""How many events the store keeps per task; older ones are dropped."""


class Events(Table):
    """The history of each task of the allocations, oldest first."""

    def add_event(self, alloc_id: str, task: str, event: TaskEvent, *, wait: bool = True) -> None:
        """Append an event to a task's history, keeping its last :data:`EVENTS_KEPT`.

        Detail values that JSON cannot hold are stored as their ``str()``.
        KeyError if the allocation is not stored (with ``wait``; else the
        commit that finds it out logs it).
        """
        row = (alloc_id, task, event.type, event.time.isoformat(), event.message,
               json.dumps(event.details, default=str))

        def apply() -> None:
            if not self._db.exists("SELECT 1 FROM allocs WHERE id = ?", (alloc_id,)):
                raise KeyError(f"no alloc {alloc_id}")
            self._db.execute(
                "INSERT INTO events (alloc_id, task, type, time, message, details) VALUES (?, ?, ?, ?, ?, ?)", row)
            self._db.execute(
                """
                DELETE FROM events WHERE alloc_id = :alloc_id AND task = :task AND id <= (
                    SELECT id FROM events WHERE alloc_id = :alloc_id AND task = :task
                    ORDER BY id DESC LIMIT 1 OFFSET :kept)
                """,
                {"alloc_id": alloc_id, "task": task, "kept": EVENTS_KEPT})

        self._db.write(apply, wait=wait)

    def events(self, alloc_id: str, task: str | None = None, limit: int | None = None) -> list[tuple[str, TaskEvent]]:
        """The events of an allocation (of one task if ``task`` is given) as
        ``(task name, event)``, oldest first; ``limit`` keeps the latest ones."""
        where, params = ("alloc_id = ?", [alloc_id]) if task is None else \
            ("alloc_id = ? AND task = ?", [alloc_id, task])
        rows = self._db.query(f"SELECT task, type, time, message, details FROM events WHERE {where} "
                              "ORDER BY id DESC LIMIT ?", [*params, -1 if limit is None else limit])
        return [(task_name, TaskEvent(type=type_, message=message, details=json.loads(details),
                                      time=datetime.fromisoformat(time_)))
                for task_name, type_, time_, message, details in reversed(rows)]
