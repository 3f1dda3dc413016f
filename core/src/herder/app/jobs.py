"""The agent's jobs: submitted, replaced, dispatched, listed and stopped."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Mapping, Sequence

from herder.app.errors import Conflict, NotFound
from herder.app.periodic import Registry, dispatch_once
from herder.app.reading import load_submitted
from herder.client.alloc_runner import AllocRunner
from herder.client.client import Client, JobSource
from herder.client.gc import GarbageCollector
from herder.client.runtime import shared_runtime
from herder.errors import DispatchError
from herder.plugins.hooks import Hooks
from herder.state import StateError

log = logging.getLogger("herder.agent")


def job_status(allocs: Sequence[AllocRunner]) -> str:
    """A job's status is its latest submission's: running while any of its
    allocations runs, else failed, complete or stopped."""
    latest = allocs[-1].job_id
    current = [a.status for a in allocs if a.job_id == latest]
    if any(s in ("pending", "running") for s in current):
        return "running"
    if "failed" in current:
        return "failed"
    return "complete" if all(s == "complete" for s in current) else "stopped"


class Jobs:
    """The jobs of ``client``; registered ones are ``registry``'s. ``lock`` orders submissions
    (the registry's too); ``draining`` says the agent takes no new job."""

    def __init__(self, client: Client, hooks: Hooks, gc: GarbageCollector, registry: Registry,
                 lock: threading.Lock, draining: threading.Event) -> None:
        self.client = client
        self.hooks = hooks
        self.gc = gc
        self.registry = registry
        self._lock = lock
        self._draining = draining
        self._purged: set[str] = set()
        """The allocations of jobs purged, listed no more while they stop and until they are collected."""
        self._purged_lock = threading.Lock()

    def submit(self, text: str, fmt: str, variables: dict[str, str], source: str,
               lines: Mapping[str, int] | None = None) -> tuple[str, list[AllocRunner], list[str]]:
        """Run a job: validated, and made the job's next version, which the client's scheduler
        places (:mod:`herder.client.scheduler`: in place, all at once or by a deployment). The
        same job submitted again changes nothing. The job's live allocations are returned.
        ``source`` and ``lines`` only place messages: no file is read for a job.

        :raises Conflict: the agent is draining or not eligible.
        :raises JobError: the job is invalid, each problem with its path.
        :raises PlacementError: it cannot be placed; the running version stays.
        """
        if self._draining.is_set():
            raise Conflict("the agent takes no new job: it is draining, or not eligible")
        job_source = JobSource(text=text, format=fmt, source=source, variables=variables)
        job = load_submitted(job_source, self.hooks, lines)
        if job.periodic is not None or job.parameterized is not None:
            return self.registry.register(job, job_source)
        self.registry.deregister(job.name)  # a registered job of that name, submitted again as an ordinary one
        with self._lock:
            version, changed = self.client.scheduler.submit(job, job_source.record(job.name))
        self.gc.wake()  # room for the new allocations, if they make too many
        if changed:
            log.info("job %s submitted: version %d", job.name, version.number)
        return job.name, self.client.scheduler.live(job.name), job.warnings

    def dispatch(self, name: str, meta: Mapping[str, str], payload: bytes) -> tuple[str, list[AllocRunner]]:
        """Dispatch the parameterized job ``name`` with ``meta`` and ``payload``: its
        child ``NAME/dispatch-<unix seconds>-<8 hex>`` is submitted as any job is
        and starts running; its name and allocations are returned.

        :raises NotFound: no job ``name``.
        :raises DispatchError: the job is not parameterized, or the dispatch breaks
            its ``parameterized`` block (each problem said); nothing is dispatched.
        :raises Conflict: the agent is draining, or the job is stopped.
        :raises PlacementError: the child cannot be placed.
        """
        parent = self.registry.parent(name)
        if parent is None or parent.job.parameterized is None:
            self.job(name)  # NotFound, unless an ordinary job has that name
            raise DispatchError([f"job {name!r} is not parameterized: only a parameterized job is dispatched"])
        if parent.status == "stopped":
            raise Conflict(f"job {name!r} is stopped: submit it again to dispatch it")
        child, source = dispatch_once(parent.source, meta, payload)
        child_name, allocs, _ = self.submit(source.text, source.format, {}, child.name)
        return child_name, allocs

    def jobs(self) -> dict[str, list[AllocRunner]]:
        """Every job with its allocations, the latest submission's first."""
        found: dict[str, list[AllocRunner]] = {}
        with self._purged_lock:
            purged = set(self._purged)
        for alloc in self.client.allocs:
            if alloc.alloc.id not in purged:
                found.setdefault(alloc.job.name, []).append(alloc)
        return dict(sorted(found.items()))

    def job(self, name: str) -> list[AllocRunner]:
        """The allocations of job ``name`` (none for a registered job never run itself).

        :raises NotFound: no job ``name``."""
        allocs = self.jobs().get(name, [])
        if not allocs and self.registry.parent(name) is None:
            raise NotFound(f"no job {name!r}")
        return allocs

    def stop(self, name: str) -> list[AllocRunner]:
        """Stop every allocation of job ``name`` gracefully (returns at once). A registered
        job stays listed, stopped: a periodic one launches no more and its children are
        stopped (as Nomad); a parameterized one is dispatched no more, and the children
        dispatched run on, each a job of its own.

        :raises NotFound: no job ``name``."""
        parent = self.registry.parent(name)
        self.client.replacements.cancel(name)
        if parent is None:
            self.job(name)  # NotFound
            return self.client.scheduler.stop(name)
        allocs = self.registry.stop_parent(parent)
        for alloc in allocs:
            alloc.stop()
        return allocs

    def purge(self, name: str) -> list[AllocRunner]:
        """Stop job ``name`` and forget it (Nomad's ``purge``): it is listed no more from now on (a
        registered one is deregistered), and its allocations are collected once they are dead.

        :raises NotFound: no job ``name``."""
        allocs = self.stop(name)
        own = [alloc for alloc in allocs if alloc.job.name == name]  # a periodic job's children stay, stopped
        with self._purged_lock:
            self._purged.update(alloc.alloc.id for alloc in own)
        self.registry.deregister(name)
        shared_runtime().pool.submit(functools.partial(self._collect, own))
        return allocs

    def _collect(self, allocs: list[AllocRunner]) -> None:
        """Collect the allocations of a job purged once every one is dead."""
        self.client.wait(allocs)
        try:
            removed = self.gc.collect_allocs(alloc.alloc.id for alloc in allocs)
        except StateError as exc:  # the periodic collection takes them later
            log.warning("purge: the allocations cannot be collected now: %s", exc)
            return
        with self._purged_lock:
            self._purged.difference_update(removed)
