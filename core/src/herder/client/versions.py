"""A job's versions: each submission that changed it, numbered from 0, in the state database.

A version is a submission (the job file as submitted, in ``jobs``) with the
group counts a scale set over the file's; a submission identical to the
latest version (the same job once loaded, whatever the text's spacing)
makes none. A version is ``stable`` once a deployment of it succeeded (or,
for a job without deployments, once it is placed): the one ``auto_revert``
goes back to.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass

from herder.errors import JobError
from herder.jobspec import load_job_text
from herder.model import Job
from herder.state import JobRecord, Store, VersionRecord

MAX_VERSIONS = 6
"""The versions of a job kept, the newest (Nomad's ``job_tracked_versions`` default), besides the latest
stable one, which ``auto_revert`` goes back to."""


@dataclass(frozen=True)
class Version:
    """Version ``number`` of job ``job``: submission ``job_id`` (``record``: what was submitted,
    None for one the state database no longer has) with ``counts`` over its groups' counts."""

    job: str
    number: int
    job_id: str
    record: JobRecord | None
    counts: Mapping[str, int] = dataclasses.field(default_factory=dict)
    submitted_at: float = 0.0
    stable: bool = False


def with_counts(job: Job, counts: Mapping[str, int]) -> Job:
    """``job`` with the groups ``counts`` names at those counts (a copy)."""
    if not counts:
        return job
    groups = [dataclasses.replace(g, count=counts[g.name]) if g.name in counts else g for g in job.groups]
    return dataclasses.replace(job, groups=groups)


class Versions:
    """The versions of every job, in ``store``."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def of(self, job: str) -> list[Version]:
        """Every version of job ``job``, oldest first."""
        return [self._version(record) for record in self._store.versions(job)]

    def latest(self, job: str) -> Version | None:
        versions = self._store.versions(job)
        return self._version(versions[-1]) if versions else None

    def number(self, job: str, number: int) -> Version | None:
        """Version ``number`` of job ``job``, if there is one."""
        return next((v for v in self.of(job) if v.number == number), None)

    def get(self, job: str, job_id: str) -> Version:
        """The latest version of job ``job`` that is submission ``job_id`` (number 0 if none is)."""
        found = [v for v in self.of(job) if v.job_id == job_id]
        return found[-1] if found else Version(job, 0, job_id, self._store.job(job_id))

    def stable(self, job: str, before: int) -> Version | None:
        """The latest stable version of job ``job`` older than version ``before``."""
        return next((v for v in reversed(self.of(job)) if v.stable and v.number < before), None)

    def load(self, version: Version) -> Job:
        """The job version ``version`` is, loaded from its file with its counts.

        :raises JobError: its submission is gone, or no longer loads."""
        if version.record is None:
            raise JobError([f"version {version.number} of job {version.job} is not in the state database"])
        record = version.record
        job = load_job_text(record.text, record.format, record.source, record.variables)
        return with_counts(job, version.counts)

    def add(self, job: str, job_id: str, counts: Mapping[str, int]) -> Version:
        """Make the next version of job ``job``: submission ``job_id`` (stored) with ``counts``."""
        latest = self.latest(job)
        record = VersionRecord(job=job, version=latest.number + 1 if latest else 0, job_id=job_id,
                               counts=dict(counts), submitted_at=time.time())
        self._store.put_version(record, keep=MAX_VERSIONS)
        return self._version(record)

    def mark_stable(self, version: Version) -> None:
        self._store.mark_stable(version.job, version.number)

    def _version(self, record: VersionRecord) -> Version:
        return Version(record.job, record.version, record.job_id, self._store.job(record.job_id), record.counts,
                       record.submitted_at, record.stable)
