"""A job's versions (``versions``) and the deployments of them (``deployments``)."""

from __future__ import annotations

import json
from typing import Any

from herder.state.records import DeploymentRecord, DeploymentStatus, VersionRecord, check_choice
from herder.state.tables.rows import Table, as_params, columns, decode, insert


class Versions(Table):
    """Each job's versions, numbered from 0: a version's submission is stored before it (``put_job``)."""

    def put_version(self, version: VersionRecord, keep: int = 0) -> None:
        """Store a new version (an IntegrityError, as a StateError, if its number is taken); with
        ``keep``, forget the job's versions older than its ``keep`` newest but its latest stable one,
        and the submissions neither an allocation nor a version names any more: one write."""
        params = {**as_params(version), "counts": json.dumps(version.counts), "stable": int(version.stable)}

        def apply() -> None:
            self._db.execute(insert("versions", VersionRecord), params)
            if not keep:
                return
            # Each version holds its job text (up to the job size limit): unbounded, a client that
            # submits in a loop filled state.db, and every history read loaded them all.
            old = ("FROM versions WHERE job = ? AND version <= ? AND version IS NOT "
                   "(SELECT MAX(version) FROM versions WHERE job = ? AND stable = 1)")
            where = (version.job, version.version - keep, version.job)
            rows = self._db.execute(f"SELECT DISTINCT job_id {old}", where).fetchall()
            self._db.execute(f"DELETE {old}", where)
            for (job_id,) in rows:
                self._db.execute("DELETE FROM jobs WHERE id = ? AND NOT EXISTS "
                                 "(SELECT 1 FROM allocs WHERE job_id = jobs.id) AND NOT EXISTS "
                                 "(SELECT 1 FROM versions WHERE job_id = jobs.id)", (job_id,))

        self._db.write(apply, retry=False)

    def versions(self, job: str) -> list[VersionRecord]:
        """The versions of ``job``, oldest first."""
        rows = self._db.query(f"SELECT {columns(VersionRecord)} FROM versions WHERE job = ? ORDER BY version",
                              (job,))
        return [_decode_version(row) for row in rows]

    def forget_versions(self, job: str) -> None:
        """Forget the versions and deployments of job ``job``, and the submissions neither an
        allocation nor a version names any more (nothing if it has none): one write."""
        def apply() -> None:
            rows = self._db.execute("SELECT DISTINCT job_id FROM versions WHERE job = ?", (job,)).fetchall()
            self._db.execute("DELETE FROM versions WHERE job = ?", (job,))
            self._db.execute("DELETE FROM deployments WHERE job = ?", (job,))
            for (job_id,) in rows:
                self._db.execute("DELETE FROM jobs WHERE id = ? AND NOT EXISTS "
                                 "(SELECT 1 FROM allocs WHERE job_id = jobs.id) AND NOT EXISTS "
                                 "(SELECT 1 FROM versions WHERE job_id = jobs.id)", (job_id,))

        self._db.write(apply)

    def mark_stable(self, job: str, version: int) -> None:
        """Mark a version stable (nothing if it is not stored)."""
        self._db.write(lambda: self._db.execute("UPDATE versions SET stable = 1 WHERE job = ? AND version = ?",
                                                (job, version)))


class Deployments(Table):
    """The deployments, by id; each one's state is the deployment engine's to read."""

    def put_deployment(self, deployment: DeploymentRecord) -> None:
        """Store a deployment, or replace the stored one of that id."""
        params = {**as_params(deployment), "state": json.dumps(deployment.state)}
        self._db.write(lambda: self._db.execute(
            insert("deployments", DeploymentRecord) + " ON CONFLICT (id) DO UPDATE SET status = excluded.status, "
            "description = excluded.description, state = excluded.state, modified_at = excluded.modified_at",
            params), retry=False)

    def deployments(self, *, status: DeploymentStatus | None = None) -> list[DeploymentRecord]:
        """Every deployment (of ``status`` only, if given), oldest first."""
        if status is not None:
            check_choice("status", status, DeploymentStatus)
        where, params = ("WHERE status = ?", (status,)) if status else ("", ())
        rows = self._db.query(f"SELECT {columns(DeploymentRecord)} FROM deployments {where} "
                              "ORDER BY created_at, rowid", params)
        return [_decode_deployment(row) for row in rows]


def _decode_version(row: tuple[Any, ...]) -> VersionRecord:
    values = decode(VersionRecord, row)
    return VersionRecord(**{**values, "counts": json.loads(values["counts"]), "stable": bool(values["stable"])})


def _decode_deployment(row: tuple[Any, ...]) -> DeploymentRecord:
    values = decode(DeploymentRecord, row)
    return DeploymentRecord(**{**values, "state": json.loads(values["state"])})
