"""The restart policy, decided as Nomad's restart tracker decides it."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from herder.model import RestartPolicy
from herder.objects import ExitResult
from herder.sdk.durations import format_duration

JITTER = 0.25

REASON_NO_RESTARTS = "Policy allows no restarts"
REASON_UNRECOVERABLE = "Error was unrecoverable"
REASON_WITHIN_POLICY = "Restart within policy"
REASON_DELAY = "Exceeded allowed attempts, applying a delay"
REASON_SUCCESS = "Restart unnecessary as task terminated successfully"


class Outcome(Enum):
    RESTART = "restart"
    FAIL = "fail"          # not restarting, the task failed
    COMPLETE = "complete"  # not restarting, the task is done


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    delay: float = 0.0


class RestartTracker:
    """Counts restarts within the policy's interval and decides what comes next.

    ``restart_on_success`` is true for service jobs: a service task that exits
    0 is restarted like any other exit; a batch task that exits 0 is complete.

    ``count`` and ``window_start`` are persisted with the task, so a herder
    started again goes on counting; hence the wall clock (``time.time``).
    """

    def __init__(self, policy: RestartPolicy, restart_on_success: bool,
                 clock: Callable[[], float] = time.time, rng: random.Random | None = None,
                 count: int = 0, window_start: float | None = None) -> None:
        self.policy = policy
        self.restart_on_success = restart_on_success
        self._clock = clock
        self._rng = rng or random.Random()
        self.window_start = clock() if window_start is None else window_start
        self.count = count

    def after_exit(self, result: ExitResult) -> Decision:
        """Decide after the task exited with ``result``."""
        if result.successful and not self.restart_on_success:
            return Decision(Outcome.COMPLETE, REASON_SUCCESS)
        return self._decide(successful=result.successful)

    def after_start_error(self, recoverable: bool) -> Decision:
        """Decide after prestart or start raised."""
        if not recoverable:
            return Decision(Outcome.FAIL, REASON_UNRECOVERABLE)
        return self._decide(successful=False)

    def after_unhealthy(self) -> Decision:
        """Decide after the task was restarted for failing its health checks: a failure."""
        return self._decide(successful=False)

    def _decide(self, successful: bool) -> Decision:
        policy = self.policy
        if policy.attempts == 0:
            return Decision(Outcome.COMPLETE if successful else Outcome.FAIL, REASON_NO_RESTARTS)
        now = self._clock()
        if now > self.window_start + policy.interval:
            self.count = 0
            self.window_start = now
        self.count += 1
        if self.count <= policy.attempts:
            return Decision(Outcome.RESTART, REASON_WITHIN_POLICY, self._jittered_delay())
        if policy.mode == "delay":
            return Decision(Outcome.RESTART, REASON_DELAY, max(0.0, self.window_start + policy.interval - now))
        return Decision(Outcome.FAIL, f"Exceeded allowed attempts {policy.attempts} in interval "
                                      f"{format_duration(policy.interval)} and mode is \"fail\"")

    def _jittered_delay(self) -> float:
        """The policy's delay plus up to 25 % of it, at random."""
        return self.policy.delay + self._rng.random() * self.policy.delay * JITTER
