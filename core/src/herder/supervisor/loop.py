"""The supervisor's event loop: one :mod:`selectors` loop over its descriptors, and its timers.

Every part of the supervisor (the sessions, the processes, the log pumps)
registers its descriptors and arms its timers here; one thread runs them all.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import selectors
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("herder.supervisor")

Handler = Callable[[int], None]
"""What a registered descriptor's readiness calls, with the events (``selectors.EVENT_READ``, ...)."""


class Timer:
    """A callback due at ``deadline`` (on the monotonic clock), unless cancelled first."""

    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        """Never call it (a no-op once it has fired)."""
        self.cancelled = True


class Loop:
    """Descriptors to watch and timers to fire; :meth:`run_once` waits for the next of either and handles it.

    A handler or timer that raises is logged and the loop goes on: a bug
    must not take every task down with the supervisor.
    """

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()

    def register(self, fileobj: Any, events: int, handler: Handler) -> None:
        """Call ``handler`` whenever ``fileobj`` (a descriptor, or an object with ``fileno()``) is ready."""
        self._selector.register(fileobj, events, handler)

    def modify(self, fileobj: Any, events: int, handler: Handler) -> None:
        """Watch ``fileobj`` for ``events`` from now on (nothing is done if that is what it is watched for)."""
        if self._selector.get_key(fileobj).events != events:
            self._selector.modify(fileobj, events, handler)

    def unregister(self, fileobj: Any) -> None:
        self._selector.unregister(fileobj)

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        """Call ``callback`` in ``delay`` seconds."""
        timer = Timer(time.monotonic() + delay, callback)
        heapq.heappush(self._timers, (timer.deadline, next(self._seq), timer))
        return timer

    def run_once(self) -> None:
        """Wait for a descriptor to be ready or the next timer to be due, and handle what is."""
        for key, events in self._selector.select(self._next_timeout()):
            try:
                key.data(events)
            except Exception:
                log.exception("unexpected error")
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            timer = heapq.heappop(self._timers)[2]
            if timer.cancelled:
                continue
            timer.cancelled = True  # fired: cancelling it later is a no-op
            try:
                timer.callback()
            except Exception:
                log.exception("unexpected error")

    def close(self) -> None:
        self._selector.close()

    def _next_timeout(self) -> float | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        if not self._timers:
            return None
        return max(0.0, self._timers[0][0] - time.monotonic())
