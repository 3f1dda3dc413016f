"""The allocations (``allocs``): each with its tasks and ports, its owner session and its status."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from herder.state.records import AllocRecord, AllocStatus, DesiredStatus, PortRecord, TaskRecord, check_choice
from herder.state.tables.rows import LIVE, Table, as_params, check_names, columns, decode, insert
from herder.state.tables.tasks import encode_task

_ALLOC_UPDATABLE = frozenset({"job_id", "status", "desired", "session", "keep"})


class Allocs(Table):
    """The allocations; storing or forgetting one stores or forgets its tasks, ports and events."""

    def put_alloc(self, alloc: AllocRecord, tasks: Sequence[TaskRecord], ports: Sequence[PortRecord]) -> None:
        """Store an allocation with its tasks and ports, replacing what was
        stored for it before (its events stay).

        Raises KeyError if its job is not stored, ValueError if a task or a
        port belongs to another allocation.
        """
        others = ({task.alloc_id for task in tasks} | {port.alloc_id for port in ports}) - {alloc.id}
        if others:
            raise ValueError(f"tasks or ports of {', '.join(sorted(others))} given with alloc {alloc.id}")

        def apply() -> None:
            if not self._db.exists("SELECT 1 FROM jobs WHERE id = ?", (alloc.job_id,)):
                raise KeyError(f"no job {alloc.job_id}")
            updates = ", ".join(f'"{f.name}" = excluded."{f.name}"' for f in fields(AllocRecord) if f.name != "id")
            self._db.execute(insert("allocs", AllocRecord) + f" ON CONFLICT (id) DO UPDATE SET {updates}",
                             _encode_alloc(alloc))
            self._db.execute("DELETE FROM tasks WHERE alloc_id = ?", (alloc.id,))
            self._db.execute("DELETE FROM ports WHERE alloc_id = ?", (alloc.id,))
            self._db.executemany(insert("tasks", TaskRecord), map(encode_task, tasks))
            self._db.executemany(insert("ports", PortRecord), map(as_params, ports))

        self._db.write(apply, retry=False)

    def alloc(self, alloc_id: str) -> AllocRecord | None:
        rows = self._db.query(f"SELECT {columns(AllocRecord)} FROM allocs WHERE id = ?", (alloc_id,))
        return _decode_alloc(rows[0]) if rows else None

    def allocs(self, *, job_name: str | None = None, live: bool | None = None,
               session: str | None = None) -> list[AllocRecord]:
        """The allocations, oldest first; ``live`` selects those pending or
        running (True) or the others (False)."""
        conditions = ["1"]
        params: list[Any] = []
        if job_name is not None:
            conditions.append("job_name = ?")
            params.append(job_name)
        if session is not None:
            conditions.append("session = ?")
            params.append(session)
        if live is not None:
            conditions.append(f"status {'' if live else 'NOT '}IN ({LIVE})")
        rows = self._db.query(f"SELECT {columns(AllocRecord)} FROM allocs WHERE {' AND '.join(conditions)} "
                              "ORDER BY created_at, rowid", params)
        return [_decode_alloc(row) for row in rows]

    def update_alloc(self, alloc_id: str, /, *, wait: bool = True, **changes: Any) -> None:
        """Change some of ``status``, ``desired``, ``session``, ``keep`` and ``job_id`` (an update in place);
        ``updated_at`` becomes now. KeyError if the allocation is not stored
        (with ``wait``; else the commit that finds it out logs it)."""
        check_names("update_alloc", changes, _ALLOC_UPDATABLE)
        if "status" in changes:
            check_choice("status", changes["status"], AllocStatus)
        if "desired" in changes:
            check_choice("desired", changes["desired"], DesiredStatus)
        self._update("allocs", {"id": alloc_id}, {**changes, "updated_at": time.time()}, f"no alloc {alloc_id}",
                     wait)

    def claim_alloc(self, alloc_id: str, *, owner: str, by: str, keep: bool) -> bool:
        """Make session ``by`` the owner of an allocation, if ``owner`` still is.

        Compare-and-set, so that of two herder processes taking over the
        allocations of a dead one, exactly one gets each allocation.
        """
        params = (by, int(keep), time.time(), alloc_id, owner)
        return bool(self._db.write(lambda: self._db.execute(
            "UPDATE allocs SET session = ?, keep = ?, updated_at = ? WHERE id = ? AND session = ?",
            params).rowcount == 1, retry=False))

    def delete_alloc(self, alloc_id: str) -> None:
        """Forget an allocation with its tasks, ports and events (nothing if it is not stored)."""
        self._db.write(lambda: self._db.execute("DELETE FROM allocs WHERE id = ?", (alloc_id,)))

    def forget_alloc(self, alloc_id: str) -> None:
        """Forget an allocation with its tasks, ports and events, and its job submission
        if no other allocation came from it (nothing if it is not stored): one write."""
        def apply() -> None:
            rows = self._db.execute("SELECT job_id FROM allocs WHERE id = ?", (alloc_id,)).fetchall()
            self._db.execute("DELETE FROM allocs WHERE id = ?", (alloc_id,))
            if rows:
                self._db.execute("DELETE FROM jobs WHERE id = ? AND NOT EXISTS "
                                 "(SELECT 1 FROM allocs WHERE job_id = jobs.id) AND NOT EXISTS "
                                 "(SELECT 1 FROM versions WHERE job_id = jobs.id)", (rows[0][0],))

        self._db.write(apply)


def _encode_alloc(alloc: AllocRecord) -> dict[str, Any]:
    return {**as_params(alloc), "dir": str(alloc.dir)}


def _decode_alloc(row: tuple[Any, ...]) -> AllocRecord:
    values = decode(AllocRecord, row)
    return AllocRecord(**{**values, "dir": Path(values["dir"]), "keep": bool(values["keep"])})
