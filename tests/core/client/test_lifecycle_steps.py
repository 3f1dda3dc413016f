"""The lifecycle steps every front end calls (herder.client.lifecycle), through the conformance kit's
harness with the real raw_exec driver and a lifecycle plugin of the test's own."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder import CleanupLater, RecoverableError, Task, TaskContext, hookimpl
from herder.client import lifecycle
from herder.client.lifecycle import CLEANUP_RETRIES, TaskLifecycle
from herder.client.script import TaskScript, run_through
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from herder.testing import DriverHarness, TaskRun
from herder.testing.harness import bounded
from tests.support.running import make_config, start_job
from tests.support.waiting import wait_for

HarnessFactory = Callable[..., DriverHarness]

SLEEPER = {"command": "/bin/sh", "args": ["-c", "exec sleep 3600"]}
GENEROUS = 30.0
"""A bound no step here comes near when its wait is cut short (the waits cut short are an hour)."""


class Cleanup:
    """A lifecycle plugin whose cleanup raises what it is given, one item per call, then returns."""

    def __init__(self, *raises: Exception) -> None:
        self.raises = list(raises)
        self.calls = 0

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        self.calls += 1
        if self.raises:
            raise self.raises.pop(0)


@pytest.fixture
def harness(driver_harness: HarnessFactory) -> DriverHarness:
    return driver_harness("raw_exec")


def with_plugin(harness: DriverHarness, plugin: object, config: dict[str, Any] | None = None,
                **fields: Any) -> TaskRun:
    harness.hooks.add_builtins([("cleanup-under-test", plugin)])
    return harness.task(config or {"command": "/bin/true"}, **fields)


def test_a_recoverable_cleanup_step_is_tried_again_up_to_four_times(
        harness: DriverHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "CLEANUP_BASE_DELAY", 0.01)
    always = Cleanup(*(RecoverableError(f"busy {n}") for n in range(10)))
    run = with_plugin(harness, always)
    with pytest.raises(RecoverableError, match="busy 4"):
        run.cleanup()
    assert always.calls == 1 + CLEANUP_RETRIES


def test_a_cleanup_step_that_recovers_on_a_retry_succeeds(
        harness: DriverHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lifecycle, "CLEANUP_BASE_DELAY", 0.01)
    flaky = Cleanup(RecoverableError("busy"), RecoverableError("still busy"))
    run = with_plugin(harness, flaky)
    assert run.cleanup() == []
    assert flaky.calls == 3


def test_an_interrupt_ends_the_retries_of_a_cleanup_step_at_once(
        harness: DriverHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    # The delay between retries is an hour: only the interrupt can end it.
    monkeypatch.setattr(lifecycle, "CLEANUP_BASE_DELAY", 3600.0)
    busy = Cleanup(RecoverableError("busy"))
    run = with_plugin(harness, busy)
    interrupt = threading.Event()
    steps = TaskLifecycle(harness.hooks, run.task, run.ctx, interrupt=interrupt)
    outcome: list[BaseException] = []

    def clean() -> None:
        try:
            steps.cleanup_step("builtin")
        except RecoverableError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=clean)
    thread.start()
    interrupt.set()
    thread.join(GENEROUS)
    assert not thread.is_alive(), "the retry delay was waited out despite the interrupt"
    assert len(outcome) == 1, "the step's last error is raised when its retries are cut short"
    assert busy.calls == 1


def test_a_step_that_asks_to_finish_later_is_handed_back(harness: DriverHarness) -> None:
    later = CleanupLater(42.0, "not yet")
    run = with_plugin(harness, Cleanup(later))
    assert run.cleanup() == [later]


def test_an_interrupt_ends_the_shutdown_delay(harness: DriverHarness) -> None:
    run = harness.task(SLEEPER, shutdown_delay="1h", kill_timeout="5s")
    handle = run.start()
    interrupt = threading.Event()
    script = TaskScript(TaskLifecycle(harness.hooks, run.task, run.ctx, interrupt=interrupt), threading.Event(), "")
    killer = threading.Thread(target=lambda: run_through(script.kill(handle)))
    killer.start()
    interrupt.set()
    killer.join(GENEROUS)
    assert not killer.is_alive(), "the shutdown delay was waited out despite the interrupt"
    assert bounded(lambda: run.wait(GENEROUS), GENEROUS + 5, "wait") is not None
    types = [event.type for event in run.events]
    assert types.index("Waiting for shutdown delay") < types.index("Killing"), types


def test_closing_the_harness_ends_a_shutdown_delay(driver_harness: HarnessFactory) -> None:
    harness = driver_harness("raw_exec")
    run = harness.task(SLEEPER, shutdown_delay="1h", kill_timeout="5s")
    run.start()
    bounded(harness.close, GENEROUS, "closing the harness")
    assert run.result is None  # killed by the harness, not waited for by the test


def test_a_second_kill_ends_the_cleanup_retries_of_the_task_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The delay between retries is an hour: only the second kill can end it.
    monkeypatch.setattr(lifecycle, "CLEANUP_BASE_DELAY", 3600.0)
    busy = Cleanup(*(RecoverableError("busy") for _ in range(10)))
    config = make_config(tmp_path / "data")
    hooks = Hooks(load_plugins(config.plugin, config.disabled_plugins))
    hooks.add_builtins([("cleanup-under-test", busy)])
    job = ('job "j" {\n group "g" {\n task "t" {\n driver = "raw_exec"\n'
           ' config {\n command = "/bin/sh"\n args = ["-c", "exec sleep 3600"]\n }\n }\n }\n}\n')
    run, wait = start_job(job, tmp_path / "data", config=config, hooks=hooks)
    run.wait_for("Started", "t", timeout=GENEROUS)
    runner = run.runner.allocs[0].tasks[0]
    first = threading.Thread(target=runner.kill)
    first.start()
    wait_for(lambda: busy.calls >= 1, GENEROUS, "the cleanup to be tried")
    bounded(runner.kill, GENEROUS, "the second kill")
    first.join(GENEROUS)
    assert not first.is_alive()
    assert wait(GENEROUS) in ("complete", "failed")
    assert busy.calls == 1
    assert "Task hook failed" in run.types("t")
