"""Rescheduling: a failed allocation replaced after its group's delay, as Nomad's scheduler does.

When an allocation of this client fails (a task's restarts exhausted under
``mode = "fail"``, a driver that cannot start it) and nobody asked it to
stop, the rules of :mod:`herder.client.reschedule` say whether it is
replaced and when. The pending replacement is a row of the deferred work
(kind :data:`KIND`, keyed by the failed allocation, due at its time), so an
agent killed meanwhile places it when it starts again (at once, if the time
has passed). At its time the client places one allocation of the same job
version, group and index (:meth:`herder.client.client.Client.place_replacement`),
which names the failed one as its previous allocation and carries its
reschedule tracker.

A job submitted again or stopped cancels the pending replacements of its
allocations (:meth:`Replacements.cancel`): the submission places what the job
needs, the stop wants nothing.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from herder.client import reschedule
from herder.client.alloc_runner import AllocRunner
from herder.client.reschedule import RescheduleEvent
from herder.client.runtime import shared_runtime
from herder.errors import HerderError, PlacementError
from herder.state import Deferred, StateError, Store

log = logging.getLogger(__name__)

KIND = "reschedule"
"""The kind of a pending replacement in the deferred work; its key is the failed allocation's ID."""


@dataclass(frozen=True)
class Rescheduling:
    """What an allocation's rescheduling looks like: the allocation it replaces and the one that
    replaced it (each "" when none), its reschedule tracker, when its own replacement is due
    (epoch seconds, None when none is), and the attempts its policy counts (0 when unlimited)."""

    previous: str = ""
    next: str = ""
    tracker: list[RescheduleEvent] = field(default_factory=list)
    due: float | None = None
    attempted: int = 0
    attempts: int = 0


class Placer(Protocol):
    """What of the client rescheduling uses (:class:`herder.client.client.Client`)."""

    store: Store

    def alloc(self, alloc_id: str) -> AllocRunner | None: ...

    def place_replacement(self, previous: AllocRunner, tracker: Sequence[RescheduleEvent], *,
                          done: tuple[str, str] | None = None) -> AllocRunner: ...

    def run(self, allocs: Iterable[AllocRunner]) -> None: ...


def failed_at(alloc: AllocRunner) -> float:
    """When an allocation failed: the last of its tasks' ends (Nomad's ``LastEventTime``), else now."""
    ends = [t.status.finished_at for t in alloc.tasks if t.status.finished_at is not None]
    return max(ends) if ends else time.time()


class Replacements:
    """The pending replacements of ``client``'s failed allocations, each on the shared timer.
    ``on_placed`` is told of each replacement placed and started (with the allocation it replaces)."""

    def __init__(self, client: Placer) -> None:
        self.client = client
        self.by_default = True
        """Whether a group whose job file has no ``reschedule`` block is rescheduled by its job type's
        default (an agent's); if not (a foreground run's), only the groups that ask are."""
        self.on_placed: Callable[[AllocRunner, AllocRunner], None] = lambda previous, alloc: None
        self.paused: Callable[[], bool] = lambda: False
        """Whether no replacement may be placed now (an agent marked ineligible): tried again later."""
        self._lock = threading.Lock()
        self._timers: dict[str, Callable[[], None]] = {}  # failed allocation ID -> what cancels its timer
        self._placing = 0  # replacements being placed: no longer stored as pending, not yet told of
        self._started = False
        self._stopped = False  # the client is closed: its state database with it

    # -- what the client tells -------------------------------------------------

    def alloc_done(self, alloc: AllocRunner) -> None:
        """``alloc`` is finished: if it failed without being asked to stop and its policy allows one
        more attempt, its replacement is due after the next delay."""
        policy = alloc.group.reschedule
        if alloc.status != "failed" or alloc.stop_requested or policy is None or not policy.enabled:
            return
        if not (policy.given or self.by_default):
            return
        tracker = self.tracker(alloc.alloc.id)
        failed = failed_at(alloc)
        if not reschedule.eligible(policy, tracker, failed):
            log.info("allocation %s failed; not rescheduled: its %d attempt(s) in %gs are used", alloc.alloc.name,
                     policy.attempts, policy.interval)
            return
        due = failed + reschedule.next_delay(policy, tracker, failed)
        try:
            self.client.store.defer(Deferred(kind=KIND, key=alloc.alloc.id, due=due,
                                             payload={"alloc_id": alloc.alloc.id}))
        except StateError as exc:
            log.error("allocation %s failed; its replacement cannot be recorded: %s", alloc.alloc.name, exc)
            return
        log.info("allocation %s failed; rescheduled in %.3gs", alloc.alloc.name, max(0.0, due - time.time()))
        with self._lock:
            if self._started:
                self._arm(alloc.alloc.id, due)

    # -- lifetime ----------------------------------------------------------------

    def start(self) -> None:
        """Arm the timers of the pending replacements of the allocations this client knows, an
        earlier herder's included: called once they are known again (after the client's restore)."""
        with self._lock:
            self._started = True
            for work in self.client.store.deferred(KIND):
                if self.client.alloc(work.key) is not None:
                    self._arm(work.key, work.due)

    def stop(self) -> None:
        """Disarm every timer; the pending replacements stay stored for the next herder."""
        with self._lock:
            self._started = False
            self._stopped = True
            for cancel in self._timers.values():
                cancel()
            self._timers.clear()

    def cancel(self, job_name: str) -> None:
        """Forget the pending replacements of the allocations of job ``job_name`` (none once the
        client is closed: a run stopped after it ended, say)."""
        if self._stopped:
            return
        for work in self.client.store.deferred(KIND):
            record = self.client.store.alloc(work.key)
            if record is None or record.job_name == job_name:
                self._forget(work.key)

    def cancel_all(self) -> None:
        """Forget every pending replacement (the agent is draining: nothing is placed any more)."""
        for work in self.client.store.deferred(KIND):
            self._forget(work.key)

    def _forget(self, alloc_id: str) -> None:
        with self._lock:
            cancel = self._timers.pop(alloc_id, None)
        if cancel is not None:
            cancel()
        self.client.store.done(KIND, alloc_id)

    def _arm(self, alloc_id: str, due: float) -> None:
        runtime = shared_runtime()
        self._timers[alloc_id] = runtime.timer.call_later(
            due - time.time(), lambda: runtime.pool.submit(lambda: self._place(alloc_id)))

    # -- placing -----------------------------------------------------------------

    def _place(self, alloc_id: str) -> None:
        """Place the replacement of failed allocation ``alloc_id``, if it is still pending."""
        with self._lock:
            if self._timers.pop(alloc_id, None) is None:
                return  # cancelled, or the client stopped, meanwhile
            self._placing += 1
        try:
            self._replace(alloc_id)
        finally:
            with self._lock:
                self._placing -= 1

    def _replace(self, alloc_id: str) -> None:
        previous = self.client.alloc(alloc_id)
        if previous is None:  # collected meanwhile: nothing is known to replace it with
            self.client.store.done(KIND, alloc_id)
            return
        policy = previous.group.reschedule
        assert policy is not None  # it was rescheduled by it
        failed = failed_at(previous)
        tracker = reschedule.carried(policy, self.tracker(alloc_id), alloc_id, failed, time.time())
        try:
            if self.paused():  # a new allocation, which an ineligible agent takes none of, as Nomad's node
                raise PlacementError("the agent takes no new allocation: it is not eligible")
            alloc = self.client.place_replacement(previous, tracker, done=(KIND, alloc_id))
        except HerderError as exc:
            retry = max(policy.delay, 1.0)
            log.warning("allocation %s cannot be replaced now (%s); trying again in %gs", previous.alloc.name,
                        exc, retry)
            self.client.store.defer(Deferred(kind=KIND, key=alloc_id, due=time.time() + retry,
                                             payload={"alloc_id": alloc_id}))
            with self._lock:
                if self._started:
                    self._arm(alloc_id, time.time() + retry)
            return
        log.info("allocation %s rescheduled: %s (%s)", previous.alloc.name, alloc.alloc.id, alloc.alloc.name)
        self.client.run([alloc])
        self.on_placed(previous, alloc)

    # -- reading -----------------------------------------------------------------

    def tracker(self, alloc_id: str) -> list[RescheduleEvent]:
        """The reschedule tracker of allocation ``alloc_id``: the replacements that led to it."""
        record = self.client.store.previous(alloc_id)
        if record is None:
            return []
        return [RescheduleEvent(time=float(e["time"]), previous=str(e["previous"]), delay=float(e["delay"]))
                for e in record.events]

    def pending(self, job_name: str) -> bool:
        """Whether a replacement of an allocation of job ``job_name`` is still to be placed (or being placed)."""
        stored = any((record := self.client.store.alloc(work.key)) is not None and record.job_name == job_name
                     for work in self.client.store.deferred(KIND))
        with self._lock:  # read after the store: a replacement no longer stored is counted here until told of
            return stored or self._placing > 0

    def of(self, alloc: AllocRunner) -> Rescheduling:
        """How ``alloc`` stands: what it replaces, what replaced it, its tracker and its next time."""
        store = self.client.store
        record = store.previous(alloc.alloc.id)
        tracker = self.tracker(alloc.alloc.id)
        due = next((work.due for work in store.deferred(KIND) if work.key == alloc.alloc.id), None)
        policy = alloc.group.reschedule
        counted = policy is not None and not policy.unlimited and policy.attempts > 0
        at = failed_at(alloc) if alloc.status == "failed" else time.time()
        return Rescheduling(previous=record.previous if record else "", next=store.replacement(alloc.alloc.id) or "",
                            tracker=tracker, due=due,
                            attempted=reschedule.attempted(policy, tracker, at) if policy and counted else 0,
                            attempts=policy.attempts if policy and counted else 0)
