"""Garbage collection of finished allocations and jobs, as Nomad's client and server GC.

Without it every finished allocation keeps its directory, its rows in
``state.db`` and its runner in memory for good. A collection (every
``[client] gc_interval``, after a submission, or on request) does, in order:

1. **Job GC**: a job whose allocations are all finished, the last of them
   longer than ``job_gc_threshold`` ago, is purged.
2. **Children**: of the finished children of a periodic or parameterized job
   (``Job.parent_id``), the :data:`CHILDREN_KEPT` that finished last are kept,
   the others purged.
3. **Allocation GC**: while the allocations on record (running or finished)
   are more than ``gc_max_allocs``, or the data dir's filesystem is fuller
   than ``gc_disk_usage_threshold`` percent, the finished allocation that
   finished first is collected (Nomad's ``keepUsageBelowThreshold``).

To collect an allocation is to remove its directory (no link followed:
:func:`~herder.client.taskdir.remove_alloc_dir`), then its rows (and its job
submission's, once no other allocation has it), then its runner. Its
directory goes first: a herder killed in between leaves a record whose
directory is gone, which the next collection finishes, never a directory
nobody knows of.

Only a finished allocation whose cleanup is done is collected: its runner has
returned (every task dead, its drivers' cleanup run) or, left by a herder that
is gone, its stored status is final; none with a cleanup step deferred for
later (:class:`herder.CleanupLater`), none whose replacement is still to be
placed (:mod:`herder.client.replacements`) or to start (it may take its
``alloc/data``). A running allocation, one that may yet
be reattached, and one of another live herder on the same data dir are never
touched.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from herder.background import Background
from herder.client.sessions import is_alive
from herder.client.taskdir import mounts_beneath, remove_alloc_dir
from herder.errors import HerderError
from herder.jobspec import load_job_text
from herder.sdk import UnsafePathError
from herder.state import LIVE_STATUSES, AllocRecord, StateError

if TYPE_CHECKING:
    from herder.client.client import Client

log = logging.getLogger(__name__)

CHILDREN_KEPT = 10
"""Finished children of one periodic or parameterized job kept; older ones are purged."""

PARALLEL_DESTROYS = 2
"""Allocations removed at once (Nomad's ``gc_parallel_destroys``): removing a directory is mostly
waiting for the filesystem."""


@dataclass
class Collected:
    """What one collection removed: allocation IDs, and the names of the jobs purged whole."""

    allocations: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Finished:
    """A finished allocation that may be collected."""

    record: AllocRecord
    parent: str
    """Its job's ``parent_id``."""

    @property
    def finished_at(self) -> float:
        return self.record.updated_at  # its final status was its last change


def disk_usage(path: os.PathLike[str] | str) -> float:
    """How full the filesystem of ``path`` is, in percent, as ``df`` counts it (blocks reserved for root aside)."""
    stats = os.statvfs(path)
    used = stats.f_blocks - stats.f_bfree
    usable = used + stats.f_bavail
    return 100.0 * used / usable if usable else 0.0


class GarbageCollector:
    """Collects what ``client``'s finished allocations and jobs leave, by ``client.config.client``'s
    settings, in a thread of its own (:meth:`start`) or on request (:meth:`collect`).
    ``on_collected`` is told the IDs of the allocations each collection removed."""

    def __init__(self, client: Client, *, on_collected: Callable[[list[str]], None] = lambda ids: None,
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.settings = client.config.client
        self._on_collected = on_collected
        self._clock = clock
        self._parents: dict[str, str] = {}  # job submission ID -> its job's parent_id, for the stored ones
        self._collecting = threading.Lock()
        self._background = Background("gc", self._step, first=self.settings.gc_interval)
        self._stopped = self._background.stopped

    def start(self) -> None:
        self._background.start()

    def stop(self) -> None:
        """Stop the thread; a collection under way removes no more allocations."""
        self._background.stop()

    def wake(self) -> None:
        """Collect soon, without waiting for the interval: allocations were added (Nomad's ``MakeRoomFor``)."""
        self._background.wake()

    def _step(self) -> float:
        try:
            self.collect()
        except StateError as exc:  # the store reports it; the next collection tries again
            log.warning("garbage collection: %s", exc)
        return self.settings.gc_interval

    # -- one collection ------------------------------------------------------

    def collect(self) -> Collected:
        """Collect now (one collection at a time)."""
        with self._collecting:
            records = self.client.store.allocs()
            finished = self._finished(records)
            by_job: dict[str, list[_Finished]] = {}
            for alloc in finished:
                by_job.setdefault(alloc.record.job_name, []).append(alloc)
            counts = Counter(record.job_name for record in records)
            whole = {name: allocs for name, allocs in by_job.items() if len(allocs) == counts[name]}
            now = self._clock()
            purged = {name for name, allocs in whole.items()
                      if now - max(a.finished_at for a in allocs) >= self.settings.job_gc_threshold}
            purged |= self._surplus_children({name: allocs for name, allocs in whole.items() if name not in purged})
            left = sorted((a for a in finished if a.record.job_name not in purged), key=lambda a: a.finished_at)
            doomed = [a for name in sorted(purged) for a in by_job[name]]
            surplus = max(0, len(records) - len(doomed) - self.settings.gc_max_allocs)
            doomed += left[:surplus]

            mounts = mounts_beneath(Path(os.path.realpath(self.client.data_dir / "allocs")))
            with ThreadPoolExecutor(PARALLEL_DESTROYS, thread_name_prefix="gc") as pool:
                removed = [a.record.id for a, done in zip(doomed, pool.map(
                    lambda a: self._remove(a.record, mounts), doomed), strict=True) if done]
            for alloc in left[surplus:]:  # one at a time: each frees some space
                if not self._disk_full():
                    break
                if self._remove(alloc.record, mounts):
                    removed.append(alloc.record.id)

            gone = set(removed)
            emptied = {r.job_name for r in records if r.id in gone} - {r.job_name for r in records if r.id not in gone}
            for name in sorted(emptied):  # its history goes with its last allocation
                self.client.deployments.forget(name)
                self.client.store.forget_versions(name)
            collected = Collected(removed, sorted(name for name in purged
                                                  if all(a.record.id in gone for a in by_job[name])))
            if removed:
                log.info("garbage collection: %d allocation(s) removed, %d job(s) purged%s", len(removed),
                         len(collected.jobs), f" ({', '.join(collected.jobs)})" if collected.jobs else "")
                self._on_collected(removed)
            kept = {record.job_id for record in records if record.id not in gone}
            self._parents = {job_id: parent for job_id, parent in self._parents.items() if job_id in kept}
            return collected

    def collect_allocs(self, alloc_ids: Iterable[str]) -> list[str]:
        """Collect the allocations of ``alloc_ids`` that are finished and cleaned up now, whatever
        their age (a job purged); the IDs of those removed."""
        wanted = set(alloc_ids)
        with self._collecting:
            finished = self._finished(r for r in self.client.store.allocs() if r.id in wanted)
            mounts = mounts_beneath(Path(os.path.realpath(self.client.data_dir / "allocs")))
            removed = [a.record.id for a in finished if self._remove(a.record, mounts)]
        if removed:
            self._on_collected(removed)
        return removed

    def _finished(self, records: Iterable[AllocRecord]) -> list[_Finished]:
        """The allocations of ``records`` that are finished, cleaned up, and this herder's to collect."""
        client = self.client
        # Deferred work names its allocation: a cleanup step to finish, a replacement to place. An
        # allocation a replacement not started yet replaces may still give it its alloc/data.
        deferred = {str(work.payload.get("alloc_id")) for work in client.store.deferred()}
        deferred |= client.store.awaited()
        found: list[_Finished] = []
        for record in records:
            if record.status in LIVE_STATUSES or record.id in deferred:
                continue
            runner = client.alloc(record.id)
            if runner is not None:
                if not runner.wait(0):  # its final status is stored just before it returns
                    continue
                parent = runner.job.parent_id
            elif record.session == client.session or not is_alive(client.data_dir, record.session):
                parent = self._stored_parent(record)
            else:
                continue  # another herder's, still running
            found.append(_Finished(record, parent))
        return found

    def _stored_parent(self, record: AllocRecord) -> str:
        """The ``parent_id`` of the job of an allocation this herder has no runner for (left by an earlier one)."""
        if record.job_id not in self._parents:
            stored = self.client.store.job(record.job_id)
            parent = ""
            if stored is not None:
                try:
                    parent = load_job_text(stored.text, stored.format, stored.source, stored.variables).parent_id
                except HerderError as exc:
                    log.warning("allocation %s: its job cannot be loaded: %s", record.name, exc)
            self._parents[record.job_id] = parent
        return self._parents[record.job_id]

    @staticmethod
    def _surplus_children(jobs: dict[str, list[_Finished]]) -> set[str]:
        """The finished children of each parent beyond the :data:`CHILDREN_KEPT` that finished last."""
        by_parent: dict[str, list[tuple[float, str]]] = {}
        for name, allocs in jobs.items():
            if allocs[0].parent:
                by_parent.setdefault(allocs[0].parent, []).append((max(a.finished_at for a in allocs), name))
        return {name for children in by_parent.values() for _, name in sorted(children, reverse=True)[CHILDREN_KEPT:]}

    def _disk_full(self) -> bool:
        return disk_usage(self.client.data_dir) > self.settings.gc_disk_usage_threshold

    def _remove(self, record: AllocRecord, mounts: list[Path]) -> bool:
        """Collect one allocation (``mounts``: the mount points in ``allocs``); whether it was.
        Once the collector is stopping (the agent is going away), none is."""
        if self._stopped.is_set():
            return False
        client = self.client
        try:
            remove_alloc_dir(client.data_dir, record.id, mounts)
        except (OSError, UnsafePathError) as exc:  # a mount point, a directory swapped for a link
            log.warning("garbage collection: allocation %s (%s) is kept: %s", record.name, record.id, exc)
            return False
        client.store.forget_alloc(record.id)
        client.forget(record.id)
        return True
