"""The restart policy decisions, against a controlled clock (Nomad's restart tracker rules)."""

from __future__ import annotations

import random

import pytest

from herder.client.restarts import (
    REASON_DELAY,
    REASON_NO_RESTARTS,
    REASON_SUCCESS,
    REASON_UNRECOVERABLE,
    REASON_WITHIN_POLICY,
    Outcome,
    RestartTracker,
)
from herder.model import RestartPolicy
from herder.objects import ExitResult

FAILED = ExitResult(exit_code=1)
OK = ExitResult(exit_code=0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tracker(attempts: int = 2, interval: float = 60, delay: float = 10, mode: str = "fail",
            service: bool = True) -> tuple[RestartTracker, Clock]:
    clock = Clock()
    return RestartTracker(RestartPolicy(attempts, interval, delay, mode), service, clock,
                          random.Random(7)), clock


def test_fail_mode_gives_up_after_attempts_within_the_interval() -> None:
    t, clock = tracker(attempts=2)
    assert t.after_exit(FAILED).outcome is Outcome.RESTART
    clock.now += 5
    assert t.after_exit(FAILED).reason == REASON_WITHIN_POLICY
    clock.now += 5
    decision = t.after_exit(FAILED)
    assert decision.outcome is Outcome.FAIL
    assert decision.reason == 'Exceeded allowed attempts 2 in interval 1m and mode is "fail"'


def test_the_count_resets_when_the_interval_has_passed() -> None:
    t, clock = tracker(attempts=1, interval=60)
    assert t.after_exit(FAILED).outcome is Outcome.RESTART
    clock.now += 61
    assert t.after_exit(FAILED).outcome is Outcome.RESTART
    clock.now += 1
    assert t.after_exit(FAILED).outcome is Outcome.FAIL


def test_delay_mode_waits_out_the_interval_then_counts_again() -> None:
    t, clock = tracker(attempts=1, interval=60, delay=5, mode="delay")
    assert t.after_exit(FAILED).outcome is Outcome.RESTART
    clock.now += 20
    decision = t.after_exit(FAILED)
    assert (decision.outcome, decision.reason) == (Outcome.RESTART, REASON_DELAY)
    assert decision.delay == pytest.approx(40)
    clock.now += decision.delay + 0.001
    decision = t.after_exit(FAILED)
    assert decision.reason == REASON_WITHIN_POLICY
    assert t.count == 1


def test_delay_has_up_to_25_percent_jitter() -> None:
    delays = []
    for seed in range(200):
        t = RestartTracker(RestartPolicy(1000, 1e9, 10, "fail"), True, Clock(), random.Random(seed))
        delays.append(t.after_exit(FAILED).delay)
    assert min(delays) >= 10 and max(delays) <= 12.5
    assert max(delays) - min(delays) > 2  # it really is spread, not a constant


def test_a_batch_task_that_succeeds_is_complete() -> None:
    t, _ = tracker(service=False)
    decision = t.after_exit(OK)
    assert (decision.outcome, decision.reason) == (Outcome.COMPLETE, REASON_SUCCESS)


def test_a_service_task_that_exits_0_is_restarted() -> None:
    t, _ = tracker(service=True)
    assert t.after_exit(OK).outcome is Outcome.RESTART


def test_no_attempts_allowed() -> None:
    t, _ = tracker(attempts=0)
    assert t.after_exit(FAILED) == t.after_exit(FAILED)
    assert t.after_exit(FAILED).reason == REASON_NO_RESTARTS
    assert t.after_exit(FAILED).outcome is Outcome.FAIL
    assert t.after_exit(OK).outcome is Outcome.COMPLETE


def test_start_errors() -> None:
    t, _ = tracker(attempts=1)
    unrecoverable = t.after_start_error(recoverable=False)
    assert (unrecoverable.outcome, unrecoverable.reason) == (Outcome.FAIL, REASON_UNRECOVERABLE)
    assert t.after_start_error(recoverable=True).outcome is Outcome.RESTART
    assert t.after_start_error(recoverable=True).outcome is Outcome.FAIL


def test_a_signal_is_a_failure() -> None:
    t, _ = tracker(service=False, attempts=0)
    assert t.after_exit(ExitResult(exit_code=0, signal=9)).outcome is Outcome.FAIL
