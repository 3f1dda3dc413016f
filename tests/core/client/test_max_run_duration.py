"""A group's ``max_run_duration``: its tasks are killed once it has passed, and not restarted."""

from __future__ import annotations

from pathlib import Path

from herder.client.alloc_runner import MAX_RUN_DURATION_EXCEEDED
from tests.support.running import run_job


def job(group: str) -> str:
    return f'job "timed" {{\n type = "batch"\n group "g" {{\n {group}\n }}\n}}\n'


def sh(name: str, script: str, extra: str = "") -> str:
    return (f'task "{name}" {{\n driver = "raw_exec"\n {extra}\n config {{\n command = "/bin/sh"\n'
            f' args = ["-c", "{script}"]\n }}\n }}\n')


RESTARTS = 'restart {\n attempts = 3\n delay = "0s"\n mode = "fail"\n }'


def test_a_task_past_max_run_duration_is_killed_and_not_restarted(data_dir: Path) -> None:
    run = run_job(job(f'max_run_duration = "1s"\n {RESTARTS}\n' + sh("sleeper", "sleep 300")), data_dir)
    assert run.status == "complete"
    types = run.types("sleeper")
    assert types.count("Started") == 1
    assert "Restarting" not in types
    (killing,) = [r.event for r in run.events if r.event.type == "Killing"]
    assert killing.message == MAX_RUN_DURATION_EXCEEDED


def test_poststop_tasks_do_not_start_once_max_run_duration_has_passed(data_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "poststop-ran"
    poststop = sh("after", f"touch {marker}", 'lifecycle {\n hook = "poststop"\n }')
    run = run_job(job('max_run_duration = "1s"\n' + sh("main", "sleep 300") + poststop), data_dir)
    assert run.status == "complete"
    assert "Started" not in run.types("after")
    assert not marker.exists()


def test_a_task_that_ends_in_time_is_not_killed(data_dir: Path) -> None:
    run = run_job(job('max_run_duration = "1h"\n' + sh("quick", "exit 0")), data_dir)
    assert run.status == "complete"
    assert "Killing" not in run.types("quick")
