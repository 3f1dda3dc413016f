"""What the runners of a client run on: a small pool of worker threads and one timer thread.

A task runner holds a thread only while one of its steps runs (a hook, a
start, a kill); between steps it waits without one: for its task's exit
(see :class:`herder.client.lifecycle.ExitWatch`), or for a delay on the
:class:`Timer`. So the threads of a client do not grow with its tasks.

The pool has :data:`POOL_SIZE` workers. The steps are mostly waits on other
processes (the supervisor, a container runtime, the disk), which is why it
has more workers than cores; past a few per core they would only contend
for the interpreter's lock, hence the bound. A step may also block for long
(a template waiting for its data, an image pull, a task given
``kill_timeout`` to exit): when the queue has not moved for
:data:`STARVED_AFTER` seconds while every worker is held, a worker is added,
so work blocked in plugins never stalls the rest of the client; workers
beyond the pool's size leave after :data:`IDLE_EXIT` idle seconds. Work that
must not wait its turn (a task's kill, which a handle may take its
``kill_timeout`` over, while the kills of a stop must all begin together) is
given a latency: past it, it runs on a thread of its own.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

POOL_SIZE = min(32, 4 * (os.cpu_count() or 1))
"""How many workers the pool keeps (as many as it needed, up to this)."""

STARVED_AFTER = 2.0
"""How long queued work waits, with no step finishing, before a worker is added."""

IDLE_EXIT = 30.0
"""How long a worker beyond :data:`POOL_SIZE` waits for work before it leaves."""

MAX_WAIT = 3600.0
"""The longest the timer thread waits at once: a call due later (a job's ``max_run_duration`` of a
million years) is waited for in steps, as a longer wait than ``threading.TIMEOUT_MAX`` raises, and the
thread that every allocation's delays share would end."""


@dataclass(order=True)
class _Entry:
    due: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)


class Timer:
    """Calls callbacks when they are due, all from one thread (started on first use).

    A callback must be quick (hand the work to a :class:`WorkerPool`): the
    ones due after it wait for it.
    """

    def __init__(self, name: str = "herder-timer") -> None:
        self._name = name
        self._heap: list[_Entry] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def call_later(self, delay: float, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` in ``delay`` seconds; returns what cancels the call."""
        entry = _Entry(time.monotonic() + max(0.0, delay), next(self._seq), callback)
        with self._cond:
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()

        def cancel() -> None:
            entry.cancelled = True

        return cancel

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._heap or self._heap[0].due > (now := time.monotonic()):
                    self._cond.wait(min(self._heap[0].due - now, MAX_WAIT) if self._heap else None)
                entry = heapq.heappop(self._heap)
            if not entry.cancelled:
                try:
                    entry.callback()
                except Exception:  # one callback's bug must not stop every later one
                    log.exception("timer callback %r failed", entry.callback)


class WorkerPool:
    """Runs callables on at most ``size`` worker threads, started as needed; more only when
    every worker is blocked (see the module's description)."""

    def __init__(self, size: int = POOL_SIZE, timer: Timer | None = None, *, name: str = "herder-runner",
                 starved_after: float = STARVED_AFTER) -> None:
        self.size = size
        self._timer = timer or Timer()
        self._name = name
        self._starved_after = starved_after
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._workers = 0
        self._idle = 0
        self._queued = 0
        self._finished = 0  # steps finished, to tell a blocked pool from a busy one
        self._watching = False
        self._names = itertools.count(1)

    @property
    def workers(self) -> int:
        with self._lock:
            return self._workers

    def submit(self, work: Callable[[], None], *, within: float | None = None) -> None:
        """Run ``work`` on a worker; what it raises is logged. With ``within``, it starts at most
        that many seconds later: on a thread of its own if no worker has taken it by then."""
        if within is not None:
            work = self._claimed(work, within)
        with self._lock:
            self._queued += 1
            start = self._idle < self._queued and self._workers < self.size
            if start:
                self._workers += 1
            watch = not start and not self._watching and self._idle < self._queued
            if watch:
                self._watching = True
        self._queue.put(work)
        if start:
            self._start_worker()
        if watch:
            self._watch(self._finished)

    def _claimed(self, work: Callable[[], None], within: float) -> Callable[[], None]:
        """``work`` for a worker, run instead on a thread of its own if no worker took it within ``within`` s."""
        claim = threading.Lock()  # whoever acquires it runs the work: a worker or the thread

        def on_worker() -> None:
            if claim.acquire(blocking=False):
                work()

        def late() -> None:
            if claim.acquire(blocking=False):
                threading.Thread(target=self._run, args=(work,), name=f"{self._name}-late", daemon=True).start()

        self._timer.call_later(within, late)
        return on_worker

    def _start_worker(self) -> None:
        threading.Thread(target=self._work, name=f"{self._name}-{next(self._names)}", daemon=True).start()

    def _watch(self, finished: int) -> None:
        """While work is queued: add a worker whenever no step finished in ``starved_after`` seconds."""
        def check() -> None:
            with self._lock:
                if self._queued <= self._idle:
                    self._watching = False
                    return
                starved = self._finished == finished
                if starved:
                    self._workers += 1
                now = self._finished
            if starved:
                log.info("every runner worker is blocked; adding one (%d now)", self._workers)
                self._start_worker()
            self._watch(now)

        self._timer.call_later(self._starved_after, check)

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
                extra = self._workers > self.size
            try:
                work = self._queue.get(timeout=IDLE_EXIT if extra else None)
            except queue.Empty:
                with self._lock:
                    self._idle -= 1
                    self._workers -= 1
                return
            with self._lock:
                self._idle -= 1
                self._queued -= 1
            self._run(work)

    def _run(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception:  # the work's own bug: the worker goes on
            log.exception("runner step %r failed", work)
        finally:
            with self._lock:
                self._finished += 1


@dataclass
class Runtime:
    """The pool and the timer the runners of a client share."""

    timer: Timer = field(default_factory=Timer)
    pool: WorkerPool = field(init=False)

    def __post_init__(self) -> None:
        self.pool = WorkerPool(timer=self.timer)


_shared: Runtime | None = None
_shared_lock = threading.Lock()


def shared_runtime() -> Runtime:
    """The runtime of this process: every client's runners share one pool and one timer."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Runtime()
        return _shared
