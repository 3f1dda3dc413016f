"""A job's versions: its submissions this client still knows, numbered from 0 in order.

Each submission that changed the job is a version (the same text submitted
again is the same one): its allocations say which ones are still known, the
state database what was submitted and when.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from herder.client.alloc_runner import AllocRunner
from herder.state import JobRecord, Store


@dataclass(frozen=True)
class Version:
    """Submission ``job_id`` of job ``job``, the ``number``-th still known (from 0);
    ``record`` is what was submitted (None for one the state database no longer has)."""

    job: str
    number: int
    job_id: str
    record: JobRecord | None


class Versions:
    """The versions of every job, read from ``allocs`` (the client's allocations) and ``store``."""

    def __init__(self, store: Store, allocs: Callable[[], list[AllocRunner]]) -> None:
        self._store = store
        self._allocs = allocs

    def ids(self, job: str) -> list[str]:
        """The submissions of job ``job`` still known, oldest first."""
        found: list[str] = []
        for alloc in self._allocs():
            if alloc.job.name == job and alloc.job_id not in found:
                found.append(alloc.job_id)
        return found

    def number(self, job: str, job_id: str) -> int:
        """The version of job ``job`` that submission ``job_id`` is: how many other
        submissions of it still known came before (0 for one not known)."""
        ids = self.ids(job)
        return ids.index(job_id) if job_id in ids else 0

    def of(self, job: str) -> list[Version]:
        """Every version of job ``job`` still known, oldest first."""
        return [Version(job, number, job_id, self._store.job(job_id))
                for number, job_id in enumerate(self.ids(job))]

    def latest(self, job: str) -> Version | None:
        versions = self.of(job)
        return versions[-1] if versions else None

    def get(self, job: str, job_id: str) -> Version:
        """Submission ``job_id`` of job ``job`` as a version (number 0 if it is not known)."""
        return Version(job, self.number(job, job_id), job_id, self._store.job(job_id))
