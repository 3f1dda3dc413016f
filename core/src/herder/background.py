"""A thread of its own for one recurring chore: the client's fingerprints, usage samples, deferred cleanups
and garbage collection; the services' sync loop."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Background:
    """Calls ``step()`` over and over on a thread of its own, from :meth:`start` to :meth:`stop`.

    Each call returns how many seconds to wait before the next (None: until
    woken); the first call comes ``first`` seconds after the start.
    :meth:`wake` cuts a wait short, so that work added meanwhile is not left
    waiting; a wake during a call makes the next one come at once.
    """

    def __init__(self, name: str, step: Callable[[], float | None], *, first: float | None = 0.0) -> None:
        self.name = name
        self.stopped = threading.Event()
        """Set by :meth:`stop`: a long step looks at it (or waits on it) to end early."""
        self._step = step
        self._first = first
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    @property
    def running(self) -> bool:
        """Whether the thread was started and has not ended."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self, join: bool = True) -> None:
        """No more calls; with ``join``, return once the call under way has returned."""
        self.stopped.set()
        self._wake.set()
        if join and self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def _loop(self) -> None:
        delay = self._first
        while True:
            self._wake.wait(delay)
            self._wake.clear()
            if self.stopped.is_set():
                return
            delay = self._step()
