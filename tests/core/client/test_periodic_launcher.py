"""The launcher: one thread calling back at the launch times of every periodic job added."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from herder.client.periodic import Launcher
from herder.model import Periodic
from tests.support.waiting import poll, wait_for

EVERY_SECOND = Periodic(crons=("* * * * * * *",))


class Recorder:
    def __init__(self) -> None:
        self.launches: list[tuple[str, datetime, datetime]] = []  # name, due, called
        self.lock = threading.Lock()
        self.fail = False

    def __call__(self, name: str, at: datetime) -> None:
        with self.lock:
            self.launches.append((name, at, datetime.now(UTC)))
        if self.fail:
            raise RuntimeError("launch failed")

    def of(self, name: str) -> list[datetime]:
        with self.lock:
            return [at for launched, at, _ in self.launches if launched == name]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def launcher(recorder: Recorder) -> Iterator[Launcher]:
    launcher = Launcher(recorder)
    launcher.start()
    try:
        yield launcher
    finally:
        launcher.stop()


def test_launches_at_each_time_and_never_early(launcher: Launcher, recorder: Recorder) -> None:
    first = launcher.add("a", EVERY_SECOND)
    assert first is not None and first.microsecond == 0 and first > datetime.now(UTC) - timedelta(seconds=1)
    wait_for(lambda: len(recorder.of("a")) >= 3, what="three launches")
    times = recorder.of("a")[:3]
    assert times[0] == first
    assert [later - earlier for earlier, later in itertools.pairwise(times)] == [timedelta(seconds=1)] * 2
    with recorder.lock:
        assert all(called >= due for _, due, called in recorder.launches)


def test_a_removed_job_launches_no_more_and_others_go_on(launcher: Launcher, recorder: Recorder) -> None:
    launcher.add("a", EVERY_SECOND)
    launcher.add("b", EVERY_SECOND)
    wait_for(lambda: recorder.of("a") and recorder.of("b"), what="both launched")
    launcher.remove("a")
    assert launcher.next_launch("a") is None
    seen = len(recorder.of("a"))
    count_b = len(recorder.of("b"))
    wait_for(lambda: len(recorder.of("b")) >= count_b + 2, what="b launched twice more")
    assert len(recorder.of("a")) <= seen + 1  # at most the launch already under way when it was removed


def test_a_failed_launch_does_not_stop_the_schedule(launcher: Launcher, recorder: Recorder) -> None:
    recorder.fail = True
    launcher.add("a", EVERY_SECOND)
    wait_for(lambda: len(recorder.of("a")) >= 2, what="a second launch after a failed one")


def test_a_schedule_with_no_time_left_never_launches(launcher: Launcher, recorder: Recorder) -> None:
    assert launcher.add("past", Periodic(crons=("0 0 1 1 * 1999",))) is None
    assert launcher.next_launch("past") is None


def test_launches_missed_are_not_caught_up(recorder: Recorder) -> None:
    launcher = Launcher(recorder)
    try:
        # Planned from a time long past, as a restarted agent might: only the next time after now runs.
        first = launcher.add("a", EVERY_SECOND, datetime.now(UTC) - timedelta(hours=1))
        assert first is not None and first > datetime.now(UTC) - timedelta(seconds=1)
        launcher.start()
        wait_for(lambda: recorder.of("a"), what="a launch")
        assert not poll(lambda: len(recorder.of("a")) > 3, timeout=1.5)  # no burst of the hour missed
    finally:
        launcher.stop()
