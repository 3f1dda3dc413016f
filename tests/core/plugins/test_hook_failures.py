"""A plugin raising in any hook becomes a task event; the runner never dies of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.events import TASK_HOOK_FAILED as HOOK_FAILED
from tests.support.running import make_config, run_job, start_job

from .conftest import HookLog, plugin_config
from .test_hook_order import BATCH, SERVICE

OBSERVERS = ["herder_task_poststart", "herder_task_exited", "herder_task_cleanup"]


@pytest.mark.parametrize("hook", OBSERVERS)
def test_observer_failure_is_an_event_and_the_task_completes(hook: str, recording: HookLog,
                                                              data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, raise_in=[hook]))
    run = run_job(BATCH, data_dir, config=config)
    assert run.status == "complete"
    failures = [r.event for r in run.events if r.event.type == HOOK_FAILED]
    assert len(failures) == 1
    assert failures[0].details["plugin"] == "recorder"
    assert failures[0].details["hook"] == hook
    assert "lifecycle broke in" in failures[0].message


def test_prekill_failure_still_kills(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, raise_in=["herder_task_prekill"]))
    run, wait = start_job(SERVICE, data_dir, config=config)
    run.wait_for("Started")
    run.runner.stop()
    assert wait() == "stopped"
    assert HOOK_FAILED in run.types() and "Killed" in run.types()


def test_event_observer_failure_is_logged_not_fatal(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, raise_in=["herder_task_event"]))
    assert run_job(BATCH, data_dir, config=config).status == "complete"


def test_prestart_failure_is_a_setup_failure(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, raise_in=["herder_task_prestart"]))
    run = run_job(SERVICE, data_dir, config=config)
    assert run.status == "failed"
    types = run.types("t")
    assert types[-2:] == ["Setup Failure", "Not Restarting"]
    assert "Started" not in types
    assert run.events[-1].event.message == "Error was unrecoverable"
    assert [c for c in recording.calls() if c[0] == "herder_task_cleanup"]  # cleanup still ran


def test_recoverable_prestart_error_is_retried(recording: HookLog, data_dir: Path) -> None:
    job = BATCH.replace('group "g" {', 'group "g" {\n restart {\n attempts = 1\n delay = "0s"\n'
                        ' interval = "10s"\n }')
    config = make_config(data_dir, plugin_config(recording, recoverable_once=["herder_task_prestart"]))
    run = run_job(job, data_dir, config=config)
    assert run.status == "complete"
    assert run.types("t")[:4] == ["Received", "Task Setup", "Setup Failure", "Restarting"]
    assert "Started" in run.types("t")


def test_alloc_prerun_failure_fails_the_allocation(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, raise_in=["herder_alloc_prerun"]))
    run = run_job(BATCH, data_dir, config=config)
    assert run.status == "failed"
    assert run.types("t") == ["Setup Failure"]


def test_alloc_postrun_failure_is_an_event(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, raise_in=["herder_alloc_postrun"]))
    run = run_job(BATCH, data_dir, config=config)
    assert run.status == "complete"
    assert run.types("t")[-1] == HOOK_FAILED


def test_recoverable_cleanup_error_is_retried(recording: HookLog, data_dir: Path) -> None:
    config = make_config(data_dir, plugin_config(recording, recoverable_once=["herder_task_cleanup"]))
    run = run_job(BATCH, data_dir, config=config)
    assert run.status == "complete"
    assert HOOK_FAILED not in run.types()
    assert [c for c in recording.calls() if c[0] == "herder_task_cleanup"] == [
        ("herder_task_cleanup", "driver"), ("herder_task_cleanup", "lifecycle"), ("herder_task_cleanup", "lifecycle")]
