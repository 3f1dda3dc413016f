from __future__ import annotations

import pytest

from herder.jobspec import format_duration, parse_duration

from .helpers import load, problems, task_hcl


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("500ms", 0.5),
        ("10s", 10.0),
        ("1m30s", 90.0),
        ("2h", 7200.0),
        ("1.5s", 1.5),
        ("1h2m3s4ms", 3723.004),
        ("250us", 0.00025),
        ("0", 0.0),
        (" 3s ", 3.0),
        (12, 12.0),
        (0.25, 0.25),
    ],
)
def test_parse_duration(value: str | float, seconds: float) -> None:
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["10", "10x", "s", "", "-5s", "1m-3s", "1.2.3s", -1, float("inf"), float("nan")])
def test_bad_durations(value: str | float) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize("value", [True, None, [], {}])
def test_non_durations(value: object) -> None:
    with pytest.raises(TypeError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.5, "500ms"), (15, "15s"), (90, "1m30s"), (1800, "30m"), (7200, "2h"), (1.5, "1.5s")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_durations_in_job_files_are_seconds() -> None:
    job = load(
        "job: {name: j, groups: [{name: g, tasks: [{name: t, driver: d, kill_timeout: 2.5, shutdown_delay: 1m}]}]}",
        "yaml",
    )
    task = job.groups[0].tasks[0]
    assert (task.kill_timeout, task.shutdown_delay) == (2.5, 60.0)


@pytest.mark.parametrize("value", ['"10"', '"soon"', "-1", "true"])
def test_bad_durations_in_job_files_name_their_path(value: str) -> None:
    errors = problems(task_hcl(f"shutdown_delay = {value}"))
    assert len(errors) == 1
    assert errors[0].startswith("job.hcl:7: job.groups[0].tasks[0].shutdown_delay: ")
