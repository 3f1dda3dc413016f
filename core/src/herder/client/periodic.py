"""The clock of periodic jobs: one thread that calls back at each job's launch times.

:class:`Launcher` knows schedules and time, nothing of what a launch does:
the agent and a foreground ``herder run`` give it the function that makes
and runs the child. Launches are never caught up: after a launch (or a
pause, or a restart) the next one is the first time of the schedule after
now, so a late launch is followed by the next on time rather than by a burst.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from herder.errors import HerderError
from herder.jobspec.dispatch import next_launch_time
from herder.model import Periodic

log = logging.getLogger(__name__)

Launch = Callable[[str, datetime], object]
"""What to do at a launch time: the job's name, and the time it was due."""


class Launcher:
    """Calls ``launch(name, time)`` at each launch time of each job added, from
    one thread (:meth:`start`), one launch after the other.

    A launch that raises is logged (a :class:`HerderError`, such as a child
    that cannot be placed, without a traceback); the schedule goes on.
    """

    def __init__(self, launch: Launch) -> None:
        self._launch = launch
        self._schedules: dict[str, Periodic] = {}
        self._next: dict[str, datetime] = {}
        self._queue: list[tuple[float, str]] = []  # (due, name); entries no longer in _next are stale
        self._changed = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def add(self, name: str, periodic: Periodic, after: datetime | None = None) -> datetime | None:
        """Launch ``name`` on ``periodic``'s schedule from its first time after now and
        after ``after`` (its latest launch, if later: a clock set back launches no time
        twice), replacing its schedule if it had one; returns that first time, None
        when the schedule has none left. Times before now are never launched."""
        now = datetime.now(UTC)
        with self._changed:
            self._schedules[name] = periodic
            return self._plan(name, now if after is None else max(after, now))

    def remove(self, name: str) -> None:
        """Launch ``name`` no more (nothing if it was not added)."""
        with self._changed:
            self._schedules.pop(name, None)
            self._next.pop(name, None)

    def next_launch(self, name: str) -> datetime | None:
        """When ``name`` launches next; None if it does not."""
        with self._changed:
            return self._next.get(name)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="periodic-launcher", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop launching; returns once a launch under way has returned."""
        with self._changed:
            self._stopping = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join()

    def _plan(self, name: str, after: datetime) -> datetime | None:
        """Schedule the next launch of ``name`` after ``after``; called with the lock held."""
        found = next_launch_time(self._schedules[name], after)
        if found is None:
            self._next.pop(name, None)
            log.info("periodic job %s has no launch time left", name)
            return None
        self._next[name] = found
        heapq.heappush(self._queue, (found.timestamp(), name))
        self._changed.notify()
        return found

    def _stale(self, due: float, name: str) -> bool:
        """Whether a queued launch no longer counts: its job was removed, or planned again since."""
        planned = self._next.get(name)
        return planned is None or planned.timestamp() != due

    def _due(self) -> tuple[str, datetime] | None:
        """The next launch once it is due, removed from the queue (and the one after it
        planned); None once stopping. Called with the lock held."""
        while not self._stopping:
            while self._queue and self._stale(*self._queue[0]):
                heapq.heappop(self._queue)
            if not self._queue:
                self._changed.wait()
                continue
            due, name = self._queue[0]
            wait = due - time.time()
            if wait > 0:
                self._changed.wait(wait)
                continue
            heapq.heappop(self._queue)
            at = self._next[name]
            # The next time after now, not after this one: a launch late by more than a
            # period is not followed by the ones it missed.
            self._plan(name, max(at, datetime.now(UTC)))
            return name, at
        return None

    def _loop(self) -> None:
        while True:
            with self._changed:
                found = self._due()
            if found is None:
                return
            name, at = found
            try:
                self._launch(name, at)
            except HerderError as exc:  # the child cannot be placed, say: the next launch may be
                log.warning("periodic job %s: the launch of %s failed: %s", name, at.isoformat(), exc)
            except Exception:
                log.exception("periodic job %s: the launch of %s failed", name, at.isoformat())
