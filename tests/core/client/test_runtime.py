"""The runners' worker pool and timer, and how a runner learns of a task's exit without a thread."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from herder import ExitResult
from herder.client.lifecycle import Exit, TaskLifecycle
from herder.client.runtime import Timer, WorkerPool
from herder.model import Task
from herder.plugins.hooks import Hooks
from tests.support.waiting import wait_for


def test_the_pool_runs_on_at_most_its_size_of_workers() -> None:
    pool = WorkerPool(2, starved_after=3600)
    release = threading.Event()
    started: list[int] = []
    done: list[int] = []

    def work(index: int) -> None:
        started.append(index)
        release.wait()
        done.append(index)

    for index in range(6):
        pool.submit(lambda index=index: work(index))
    wait_for(lambda: len(started) == 2, what="two steps running")
    assert pool.workers == 2
    release.set()
    wait_for(lambda: len(done) == 6, what="every step done")
    assert pool.workers == 2


def test_a_pool_whose_workers_are_all_blocked_adds_one() -> None:
    pool = WorkerPool(1, starved_after=0.05)
    blocked, ran = threading.Event(), threading.Event()
    pool.submit(blocked.wait)
    pool.submit(ran.set)
    assert ran.wait(30), "the queued step never ran beside the blocked one"
    assert pool.workers == 2
    blocked.set()


def test_work_given_a_latency_runs_on_a_thread_of_its_own_once_it_is_past() -> None:
    pool = WorkerPool(1, starved_after=3600)
    blocked, ran = threading.Event(), threading.Event()
    where: list[str] = []
    pool.submit(blocked.wait)
    pool.submit(lambda: (where.append(threading.current_thread().name), ran.set()), within=0.05)
    assert ran.wait(30), "the urgent step waited for the blocked worker"
    assert where == ["herder-runner-late"] and pool.workers == 1
    blocked.set()
    once = threading.Event()
    count: list[int] = []
    pool.submit(lambda: (count.append(1), once.set()), within=0.05)  # a free worker takes it: run once
    assert once.wait(30)
    done = threading.Event()
    pool.submit(done.set, within=3600)
    assert done.wait(30) and count == [1]


def test_the_timer_calls_in_order_of_due_time_and_not_once_cancelled() -> None:
    timer = Timer()
    calls: list[str] = []
    last = threading.Event()
    timer.call_later(0.2, lambda: (calls.append("late"), last.set()))
    cancel = timer.call_later(0.05, lambda: calls.append("cancelled"))
    timer.call_later(0.1, lambda: calls.append("middle"))
    timer.call_later(0, lambda: calls.append("now"))
    cancel()
    assert last.wait(30)
    assert calls == ["now", "middle", "late"]


class Handle:
    """A handle whose task exits when ``exit`` is set; with ``notices``, it has ``on_exit``."""

    id = "h"
    network = None

    def __init__(self) -> None:
        self.exit = threading.Event()
        self.waiters: list[str] = []

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        self.waiters.append(threading.current_thread().name)
        return ExitResult(exit_code=7) if self.exit.wait(timeout) else None

    def signal(self, sig: int) -> None: ...
    def kill(self, timeout: float, sig: int | None) -> None: ...
    def stats(self) -> dict[str, Any] | None: return None
    def state(self) -> dict[str, Any]: return {}


class NoticingHandle(Handle):
    def __init__(self) -> None:
        super().__init__()
        self.callbacks: list[Any] = []

    def on_exit(self, callback: Any) -> bool:
        self.callbacks.append(callback)
        return True


def lifecycle() -> TaskLifecycle:
    """The steps of a task ``t``; only its waits are used here, which need no context but its environment."""
    ctx: Any = SimpleNamespace(env={})
    return TaskLifecycle(Hooks([]), Task(name="t", driver="raw_exec"), ctx)


def test_a_handle_with_on_exit_is_asked_with_wait_0_once_it_calls_back() -> None:
    handle = NoticingHandle()
    watch = lifecycle().watch(handle)
    told = threading.Event()
    watch.arm(told.set)
    assert len(handle.callbacks) == 1 and not handle.waiters  # no thread waits
    handle.callbacks[0]()  # an early notice: the task has not exited
    assert told.is_set() and watch.poll() is None
    told.clear()
    watch.arm(told.set)  # asked again
    handle.exit.set()
    handle.callbacks[1]()
    assert told.is_set()
    assert watch.poll() == Exit(ExitResult(exit_code=7))


def test_a_handle_without_on_exit_is_waited_for_by_a_thread_of_its_own() -> None:
    handle = Handle()
    watch = lifecycle().watch(handle)
    told = threading.Event()
    watch.arm(told.set)
    wait_for(lambda: handle.waiters, what="the waiter in wait()")
    assert handle.waiters == ["wait-t"]
    handle.exit.set()
    assert told.wait(30)
    assert watch.poll() == Exit(ExitResult(exit_code=7))
