"""The jobs: the submissions allocations run (``jobs``), and the jobs registered, not run (``parents``)."""

from __future__ import annotations

import json
from typing import Any

from herder.state.records import JobRecord, ParentRecord, ParentStatus, check_choice
from herder.state.tables.rows import Table, as_params, columns, decode, insert


class Jobs(Table):
    """The job submissions, by id: an allocation's job is stored before it (:meth:`put_job`)."""

    def put_job(self, job: JobRecord) -> None:
        """Store a job submission, unless one with the same id is stored already."""
        params = _encode_job(job)
        self._db.write(lambda: self._db.execute(insert("jobs", JobRecord) + " ON CONFLICT (id) DO NOTHING", params),
                       retry=False)

    def job(self, job_id: str) -> JobRecord | None:
        rows = self._db.query(f"SELECT {columns(JobRecord)} FROM jobs WHERE id = ?", (job_id,))
        return _decode_job(rows[0]) if rows else None


class Parents(Table):
    """The jobs registered, not run (periodic and parameterized jobs), by name."""

    def put_parent(self, parent: ParentRecord) -> None:
        """Register ``parent``, replacing the job of that name (its ``last_launch`` stays
        when the new record has none: a resubmitted job does not launch a time again)."""
        params = as_params(parent)
        self._db.write(lambda: self._db.execute(
            insert("parents", ParentRecord) + " ON CONFLICT (name) DO UPDATE SET source = excluded.source, "
            "text = excluded.text, status = excluded.status, registered_at = excluded.registered_at, "
            "last_launch = coalesce(excluded.last_launch, parents.last_launch)", params), retry=False)

    def parents(self) -> list[ParentRecord]:
        """Every registered job, by name."""
        rows = self._db.query(f"SELECT {columns(ParentRecord)} FROM parents ORDER BY name")
        return [ParentRecord(**decode(ParentRecord, row)) for row in rows]

    def update_parent(self, name: str, /, *, status: ParentStatus | None = None,
                      last_launch: float | None = None) -> None:
        """Change a registered job's status or latest launch; KeyError if it is not registered."""
        changes: dict[str, Any] = {}
        if status is not None:
            check_choice("status", status, ParentStatus)
            changes["status"] = status
        if last_launch is not None:
            changes["last_launch"] = last_launch
        if changes:
            self._update("parents", {"name": name}, changes, f"no registered job {name}", True)

    def delete_parent(self, name: str) -> None:
        """Forget a registered job (nothing if it is not registered); its children stay."""
        self._db.write(lambda: self._db.execute("DELETE FROM parents WHERE name = ?", (name,)))


def _encode_job(job: JobRecord) -> dict[str, Any]:
    return {**as_params(job), "variables": json.dumps(job.variables)}


def _decode_job(row: tuple[Any, ...]) -> JobRecord:
    values = decode(JobRecord, row)
    return JobRecord(**{**values, "variables": json.loads(values["variables"])})
