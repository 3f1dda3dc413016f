"""The rules of rescheduling against the cases of Nomad's own tests (``TestAllocation_NextDelay``,
``TestRescheduleTracker`` and ``UpdateRescheduleTracker`` in hashicorp/nomad)."""

from __future__ import annotations

import pytest

from herder.client.reschedule import MAX_PAST_EVENTS, RescheduleEvent, attempted, carried, eligible, next_delay
from herder.model import ReschedulePolicy

NOW = 1_800_000_000.0
HOUR, MINUTE = 3600.0, 60.0


def events(*pairs: tuple[float, float]) -> list[RescheduleEvent]:
    """Events from (seconds before NOW, delay) pairs."""
    return [RescheduleEvent(time=NOW - ago, previous=f"alloc-{n}", delay=delay) for n, (ago, delay) in enumerate(pairs)]


CONSTANT = ReschedulePolicy(delay=5, delay_function="constant", attempts=2, interval=10 * MINUTE)
EXPONENTIAL = ReschedulePolicy(delay=5, delay_function="exponential", max_delay=90, unlimited=True)
FIBONACCI = ReschedulePolicy(delay=5, delay_function="fibonacci", max_delay=90, unlimited=True)
FIBONACCI_50 = ReschedulePolicy(delay=5, delay_function="fibonacci", max_delay=50, unlimited=True)

FIB_SERIES = ((2 * HOUR, 5), (HOUR, 5), (HOUR, 10), (HOUR, 15), (HOUR, 25))


@pytest.mark.parametrize(("policy", "tracker", "failed_ago", "delay"), [
    pytest.param(CONSTANT, [], 2, 5, id="constant, first"),
    pytest.param(CONSTANT, events((2 * MINUTE, 5)), 2, 5, id="constant, with a tracker"),
    pytest.param(EXPONENTIAL, [], 2, 5, id="exponential, first"),
    pytest.param(EXPONENTIAL, events((2 * HOUR, 5), (HOUR, 10), (HOUR, 20)), 2, 40, id="exponential, doubled"),
    pytest.param(EXPONENTIAL, events((2 * HOUR, 5), (HOUR, 10), (HOUR, 20), (HOUR, 40), (40, 80)), 15, 90,
                 id="exponential, at the ceiling"),
    pytest.param(EXPONENTIAL, events((2 * HOUR, 5), (HOUR, 10), (HOUR, 20), (HOUR, 40), (HOUR, 80)), 15 * MINUTE, 5,
                 id="exponential, the ceiling's reset"),
    pytest.param(FIBONACCI, events((2 * HOUR, 5)), 2, 5, id="fibonacci, second"),
    pytest.param(FIBONACCI, events(*FIB_SERIES), 2, 40, id="fibonacci, the sum of the last two"),
    pytest.param(FIBONACCI_50, events(*FIB_SERIES, (40, 40)), 15, 50, id="fibonacci, at the ceiling"),
    pytest.param(FIBONACCI_50, events(*FIB_SERIES, (HOUR, 40)), 5 * MINUTE, 5, id="fibonacci, the ceiling's reset"),
    pytest.param(FIBONACCI_50, events(*FIB_SERIES, (HOUR, 40), (HOUR, 50), (MINUTE, 5)), 5, 5,
                 id="fibonacci, a new series after a reset"),
])
def test_the_next_delay_is_nomads(policy: ReschedulePolicy, tracker: list[RescheduleEvent], failed_ago: float,
                                  delay: float) -> None:
    assert next_delay(policy, tracker, NOW - failed_ago) == delay


def test_attempts_are_counted_within_the_interval_and_then_refused() -> None:
    one = events((2 * MINUTE, 5))
    two = events((3 * MINUTE, 5), (2 * MINUTE, 5))
    assert eligible(CONSTANT, [], NOW) and eligible(CONSTANT, one, NOW)
    assert attempted(CONSTANT, two, NOW) == 2
    assert not eligible(CONSTANT, two, NOW)
    # Out of the interval, attempts no longer count.
    assert attempted(CONSTANT, two, NOW + 10 * MINUTE) == 0
    assert eligible(CONSTANT, two, NOW + 10 * MINUTE)


def test_unlimited_is_always_eligible_and_no_attempts_never() -> None:
    many = events(*[(HOUR, 5)] * 20)
    assert eligible(EXPONENTIAL, many, NOW)
    assert attempted(EXPONENTIAL, many, NOW) == 0  # unlimited: nothing is counted against a limit
    assert not eligible(ReschedulePolicy(delay=5), [], NOW)


def test_a_delay_as_long_as_the_interval_is_not_eligible() -> None:
    policy = ReschedulePolicy(attempts=5, interval=20, delay=5, delay_function="exponential", max_delay=100)
    assert not eligible(policy, events((30, 5), (25, 10)), NOW)  # 20 s next: the interval is over by then


def test_the_replacement_carries_the_events_in_the_interval_and_its_own() -> None:
    tracker = events((2 * HOUR, 5), (2 * MINUTE, 5))
    new = carried(CONSTANT, tracker, "failed", NOW - 1, NOW)
    assert new == [tracker[1], RescheduleEvent(time=NOW, previous="failed", delay=5)]


def test_an_unlimited_replacement_carries_the_last_events_only() -> None:
    tracker = events(*[(50 - n, 5 * 2 ** n) for n in range(8)])
    new = carried(EXPONENTIAL, tracker, "failed", NOW - 1, NOW)
    assert new[:-1] == tracker[-MAX_PAST_EVENTS:]
    assert new[-1] == RescheduleEvent(time=NOW, previous="failed", delay=90)
