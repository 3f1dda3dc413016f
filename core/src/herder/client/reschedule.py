"""The rules of rescheduling, as Nomad's: when a failed allocation is replaced, and what the
replacement carries. Pure: times are given (epoch seconds), nothing is read or written.

An allocation that failed (and was not stopped) is replaced after a delay if
its group's :class:`~herder.model.ReschedulePolicy` allows one more attempt.
Each replacement carries a tracker: the events of the replacements that led
to it, each with its time, the allocation it replaced and the delay it
waited. From them, as Nomad's ``structs.Allocation.NextDelay``,
``NextRescheduleTime``, ``RescheduleTracker.RescheduleEligible`` and the
scheduler's ``UpdateRescheduleTracker`` compute:

- the next delay: the policy's ``delay`` for the first; then, by
  ``delay_function``, the same (constant), twice the last (exponential) or the
  sum of the last two (fibonacci), at most ``max_delay``; once at the ceiling,
  a failure that came more than ``max_delay`` after the last replacement
  starts the series again from ``delay``;
- whether one more attempt is allowed: always when ``unlimited``; else while
  the replacements within ``interval`` of the failure are fewer than
  ``attempts`` (and the next delay is shorter than ``interval``);
- what the replacement carries: the events within ``interval`` (the last
  :data:`MAX_PAST_EVENTS` when unlimited), and one more for itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from herder.model import ReschedulePolicy

MAX_PAST_EVENTS = 5
"""The events an unlimited policy's replacement carries from the ones before (Nomad's ``maxPastRescheduleEvents``)."""


@dataclass(frozen=True)
class RescheduleEvent:
    """One replacement: when it was placed, the allocation it replaced, and the delay it waited (s)."""

    time: float
    previous: str
    delay: float


Tracker = Sequence[RescheduleEvent]
"""The replacements that led to an allocation, oldest first."""


def next_delay(policy: ReschedulePolicy, tracker: Tracker, failed_at: float) -> float:
    """How long after ``failed_at`` the allocation whose ``tracker`` this is is replaced."""
    delay = policy.delay
    if not tracker:
        return delay
    last = tracker[-1]
    if policy.delay_function == "exponential":
        delay = last.delay * 2
    elif policy.delay_function == "fibonacci":
        if len(tracker) >= 2:
            before = tracker[-2].delay
            # A series that reached the ceiling and started again from the delay goes on from there.
            delay = last.delay if before == policy.max_delay and last.delay == policy.delay else last.delay + before
    else:
        return delay
    if policy.max_delay > 0 and delay > policy.max_delay:
        delay = policy.max_delay
        if failed_at - last.time > delay:  # long enough since the last failure: start again
            delay = policy.delay
    return delay


def attempted(policy: ReschedulePolicy, tracker: Tracker, at: float) -> int:
    """The replacements within the policy's ``interval`` before ``at`` (0 when attempts are unlimited)."""
    if policy.attempts <= 0:
        return 0
    return sum(1 for event in tracker if at - event.time < policy.interval)


def eligible(policy: ReschedulePolicy, tracker: Tracker, failed_at: float) -> bool:
    """Whether the allocation that failed at ``failed_at`` is replaced at all."""
    if policy.unlimited:
        return True
    if policy.attempts <= 0:
        return False
    if not tracker:
        return True
    return (attempted(policy, tracker, failed_at) < policy.attempts
            and next_delay(policy, tracker, failed_at) < policy.interval)


def carried(policy: ReschedulePolicy, tracker: Tracker, previous: str, failed_at: float,
            now: float) -> list[RescheduleEvent]:
    """The tracker of the replacement placed at ``now`` of allocation ``previous`` (whose tracker
    is ``tracker``, failed at ``failed_at``)."""
    if policy.attempts > 0:
        kept = [event for event in tracker if policy.interval > 0 and now - event.time <= policy.interval]
    else:
        kept = list(tracker[-MAX_PAST_EVENTS:])
    return [*kept, RescheduleEvent(time=now, previous=previous, delay=next_delay(policy, tracker, failed_at))]
