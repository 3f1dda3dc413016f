"""Background: a recurring chore on a thread of its own."""

from __future__ import annotations

import threading

from herder.background import Background
from tests.support.waiting import wait_for


def test_a_step_comes_again_when_woken_not_before() -> None:
    calls: list[int] = []
    called = threading.Semaphore(0)

    def step() -> None:
        calls.append(len(calls))
        called.release()
        # None: the next call only once woken

    background = Background("chore", step)
    background.start()
    try:
        assert called.acquire(timeout=30), "the first call (first=0) did not come"
        assert not called.acquire(timeout=0.2), "a step waiting for a wake ran without one"
        background.wake()
        assert called.acquire(timeout=30), "a wake did not bring the next call"
    finally:
        background.stop()
    assert calls == [0, 1]


def test_a_step_returning_a_delay_comes_again_after_it() -> None:
    counted = threading.Event()
    calls: list[None] = []

    def step() -> float:
        calls.append(None)
        if len(calls) == 3:
            counted.set()
        return 0.01

    background = Background("chore", step, first=None)
    background.start()
    try:
        background.wake()  # first=None: the first call waits for this
        assert counted.wait(30), f"{len(calls)} calls, not 3"
    finally:
        background.stop()


def test_stop_waits_for_the_call_under_way_and_no_call_follows() -> None:
    entered, release = threading.Event(), threading.Event()
    calls: list[None] = []

    def step() -> float:
        calls.append(None)
        entered.set()
        release.wait(30)
        return 0.0

    background = Background("chore", step)
    background.start()
    assert entered.wait(30)
    stopper = threading.Thread(target=background.stop)
    stopper.start()
    wait_for(lambda: background.stopped.is_set(), what="stop to be asked")
    assert stopper.is_alive(), "stop returned while a call was under way"
    release.set()
    stopper.join(30)
    assert not stopper.is_alive() and len(calls) == 1
