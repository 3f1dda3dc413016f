"""Registered jobs: periodic ones, whose children launch on their schedule, and
parameterized ones, whose children are dispatched.

One launch (:func:`launch`) serves both who launch children: the agent's
:class:`Registry` and a foreground ``herder run`` of a periodic job. The clock
that calls it is :class:`herder.client.periodic.Launcher`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from herder.app.errors import Conflict, NotFound
from herder.app.reading import canonical_document, load_submitted
from herder.client.alloc_runner import AllocRunner
from herder.client.client import Client, JobSource
from herder.client.gc import GarbageCollector
from herder.client.periodic import Launcher
from herder.client.runtime import shared_runtime
from herder.errors import HerderError, JobError, PlacementError
from herder.jobspec.dispatch import PERIODIC_SUFFIX, Child, dispatch_child, periodic_child
from herder.model import Job
from herder.plugins.hooks import Hooks
from herder.state import LIVE_STATUSES, ParentRecord, ParentStatus, StateError

log = logging.getLogger("herder.agent")


def children_of(name: str, allocs: Iterable[AllocRunner]) -> list[AllocRunner]:
    """The allocations of the children of job ``name``."""
    return [a for a in allocs if a.job.parent_id == name]


def overlapped(parent: Job, children: Iterable[AllocRunner], *, forced: bool = False) -> list[str]:
    """The children of periodic job ``parent`` still running that its ``prohibit_overlap``
    makes a launch skip; none for a forced launch, as Nomad's."""
    assert parent.periodic is not None
    if not parent.periodic.prohibit_overlap or forced:
        return []
    return sorted({a.job.name for a in children if a.status in LIVE_STATUSES})


def child_source(child: Child, parent: JobSource) -> JobSource:
    """What a child is submitted as: its canonical document, from where its parent came."""
    return JobSource(text=json.dumps(child.document), format="json", source=parent.source)


def dispatch_once(source: JobSource, meta: Mapping[str, str], payload: bytes) -> tuple[Job, JobSource]:
    """The child of a parameterized job dispatched now, to run in its place: made from
    ``source``, the job's evaluated canonical document (as :func:`herder.app.reading.evaluate_job` gives it).

    :raises DispatchError: the dispatch breaks the job's ``parameterized`` block, each problem said.
    """
    child = dispatch_child(json.loads(source.text), meta, payload, datetime.now(UTC))
    return child.job, child_source(child, source)


@dataclass
class Parent:
    """A job registered, not run: a periodic job, whose children launch on its schedule,
    or a parameterized one, whose children are dispatched. ``source`` is its canonical
    document; ``last_launch`` the time of its latest periodic child."""

    job: Job
    source: JobSource
    status: ParentStatus = "running"
    last_launch: float | None = None
    ready: Child | None = field(default=None, repr=False)
    """The child of the next launch, made ahead of its time so that it starts on time."""

    def child(self, at: datetime) -> Child:
        """The child launched at ``at``: the one made ahead if it is that one's."""
        ready, self.ready = self.ready, None
        if ready is not None and ready.job.name == f"{self.job.name}{PERIODIC_SUFFIX}{int(at.timestamp())}":
            return ready
        return periodic_child(json.loads(self.source.text), at)

    def prepare(self, at: datetime | None) -> None:
        """Make the child of the launch at ``at`` (None: none) now, ahead of its time."""
        self.ready = None if at is None else periodic_child(json.loads(self.source.text), at)


@dataclass
class Launch:
    """A periodic job's launch: its child and the child's allocations (placed, not
    running yet), or the children still running whose overlap skipped it."""

    child: Job | None = None
    allocs: list[AllocRunner] = field(default_factory=list)
    overlapping: list[str] = field(default_factory=list)


def launch(client: Client, parent: Parent, at: datetime, children: Iterable[AllocRunner], *,
           forced: bool = False, record: Callable[[float], None] = lambda at: None) -> Launch:
    """Launch ``parent``'s child due at ``at``, unless ``children`` still running make
    its ``prohibit_overlap`` skip it. ``record`` is given the launch time before the
    child is submitted: if it raises, nothing is launched. The caller runs the allocations.

    :raises PlacementError: the child cannot be placed.
    """
    running = overlapped(parent.job, children, forced=forced)
    if running:
        return Launch(overlapping=running)
    child = parent.child(at)
    record(at.timestamp())
    return Launch(child.job, client.submit(child.job, child_source(child, parent.source)))


class Registry:
    """The agent's registered jobs, kept in the state database, and their launches.

    ``lock`` is the agent's submission lock, shared with :class:`herder.app.jobs.Jobs`;
    ``draining`` says whether the agent takes no new work (no child is launched then).
    """

    def __init__(self, client: Client, hooks: Hooks, gc: GarbageCollector, lock: threading.Lock,
                 draining: threading.Event) -> None:
        self.client = client
        self.hooks = hooks
        self.gc = gc
        self._lock = lock
        self._draining = draining
        self._parents: dict[str, Parent] = {}
        self.launcher = Launcher(self._launch)
        self._warmed_up = False

    def start(self) -> None:
        """Register again the jobs of the state database, and follow their schedules."""
        self._restore()
        self.launcher.start()

    def stop(self) -> None:
        self.launcher.stop()

    def parents(self) -> dict[str, Parent]:
        """Every job registered (periodic or parameterized), by name."""
        with self._lock:
            return dict(sorted(self._parents.items()))

    def parent(self, name: str) -> Parent | None:
        with self._lock:
            return self._parents.get(name)

    def children(self, name: str) -> dict[str, list[AllocRunner]]:
        """The children of job ``name`` still known, oldest first, with their allocations."""
        found: dict[str, list[AllocRunner]] = {}
        for alloc in children_of(name, self.client.allocs):
            found.setdefault(alloc.job.name, []).append(alloc)
        return found

    def register(self, job: Job, source: JobSource) -> tuple[str, list[AllocRunner], list[str]]:
        """Register periodic or parameterized ``job``, not run, in place of any job of its name
        registered before; a periodic one follows its schedule (a new one, if it was registered)."""
        canonical = JobSource(text=json.dumps(canonical_document(source)), format="json", source=source.source)
        with self._lock:
            try:
                self.client.store.put_parent(ParentRecord(name=job.name, source=source.source, text=canonical.text,
                                                          registered_at=time.time()))
            except StateError as exc:
                raise PlacementError(f"the job cannot be registered: {exc}") from exc
            known = self._parents.get(job.name)
            parent = Parent(job, canonical, last_launch=known.last_launch if known else None)
            self._parents[job.name] = parent
            next_launch = self._follow(parent)
        if job.parameterized is not None:
            log.info("job %s registered: parameterized, run when dispatched", job.name)
        else:
            log.info("periodic job %s registered; next launch %s", job.name,
                     next_launch.isoformat() if next_launch else "never")
        return job.name, [], job.warnings

    def deregister(self, name: str) -> None:
        """Forget registered job ``name`` (nothing if there is none); its children stay."""
        with self._lock:
            if self._parents.pop(name, None) is not None:
                self.launcher.remove(name)
                self.client.store.delete_parent(name)

    def stop_parent(self, parent: Parent) -> list[AllocRunner]:
        """Stop registered ``parent``: a periodic one launches no more (its children are
        returned, to be stopped, as Nomad's), a parameterized one is dispatched no more."""
        name = parent.job.name
        with self._lock:
            self.launcher.remove(name)
            if parent.status != "stopped":
                self.client.store.update_parent(name, status="stopped")
                parent.status = "stopped"
        log.info("job %s stopped: no more %s", name, "launches" if parent.job.periodic is not None else "dispatches")
        return children_of(name, self.client.allocs) if parent.job.periodic is not None else []

    def force(self, name: str) -> tuple[str, list[AllocRunner]]:
        """Launch a child of periodic job ``name`` now, whatever its ``prohibit_overlap``:
        the child's name and allocations.

        :raises NotFound: no periodic job ``name``.
        :raises Conflict: it does not launch (stopped, disabled), or launched this second already.
        :raises PlacementError: the child cannot be placed, or the launch recorded.
        """
        parent = self.parent(name)
        if parent is None:
            raise NotFound(f"no periodic job {name!r}")
        if parent.status == "stopped" or not parent.job.launches:
            raise Conflict(f"periodic job {name!r} does not launch: "
                           + ("it is stopped" if parent.status == "stopped" else "its launches are disabled"))
        launched = self._launch(name, datetime.now(UTC).replace(microsecond=0), forced=True)
        if launched is None:
            raise Conflict(f"periodic job {name!r} launched a child this second already")
        return launched

    def _follow(self, parent: Parent) -> datetime | None:
        """Schedule ``parent``'s next launch, after now and its latest one; its next launch time."""
        if parent.status == "stopped" or not parent.job.launches:
            self.launcher.remove(parent.job.name)
            return None
        assert parent.job.periodic is not None
        last = None if parent.last_launch is None else datetime.fromtimestamp(parent.last_launch, UTC)
        if not self._warmed_up:  # once, for the first periodic job that launches, on the runners' pool
            self._warmed_up = True
            shared_runtime().pool.submit(self._prepare_launches)
        next_launch = self.launcher.add(parent.job.name, parent.job.periodic, last)
        parent.prepare(next_launch)
        return next_launch

    def _prepare_launches(self) -> None:
        """Take now what the first launch would wait for: every driver's fingerprint (taken at
        the first placement) and the supervisor (started with the first task), hundreds of
        milliseconds that would make that launch late."""
        self.client.node()
        try:
            self.client.supervisor.connect()
        except HerderError as exc:  # the launch will say it, if it still is so
            log.warning("the supervisor cannot be started: %s", exc)

    def _restore(self) -> None:
        """Register again the jobs of the state database; launches missed meanwhile are not caught up."""
        for record in self.client.store.parents():
            source = JobSource(text=record.text, format="json", source=record.source)
            try:
                job = load_submitted(source, self.hooks)
            except JobError as exc:
                log.warning("registered job %s no longer loads, left out: %s", record.name,
                            "; ".join(exc.errors))
                continue
            parent = Parent(job, source, record.status, record.last_launch)
            with self._lock:
                self._parents[record.name] = parent
                self._follow(parent)

    def _launch(self, name: str, at: datetime, *, forced: bool = False) -> tuple[str, list[AllocRunner]] | None:
        """Launch the child of periodic job ``name`` due at ``at``: its name and allocations;
        None when it is not launched (skipped, stopped, launched already, the agent draining)."""
        with self._lock:
            parent = self._parents.get(name)
            if parent is None or parent.status == "stopped" or self._draining.is_set():
                return None
            # The latest launch is stored before its child: killed in between, the agent loses a launch
            # rather than making it twice.
            if parent.last_launch is not None and at.timestamp() <= parent.last_launch:
                return None

            def record(at: float) -> None:
                try:
                    self.client.store.update_parent(name, last_launch=at)
                except StateError as exc:
                    raise PlacementError(f"the launch cannot be recorded: {exc}") from exc
                parent.last_launch = at

            launched = launch(self.client, parent, at, children_of(name, self.client.allocs), forced=forced,
                              record=record)
            if launched.child is None:
                log.info("periodic job %s: launch of %s skipped, %s still running (prohibit_overlap)", name,
                         at.isoformat(), ", ".join(launched.overlapping))
                return None
        self.client.run(launched.allocs)
        self.gc.wake()  # one child more: the oldest finished ones beyond the kept may go
        log.info("periodic job %s launched %s%s", name, launched.child.name, " (forced)" if forced else "")
        with self._lock:
            parent.prepare(self.launcher.next_launch(name))
        return launched.child.name, launched.allocs
