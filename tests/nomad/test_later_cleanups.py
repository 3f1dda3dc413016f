"""The Nomad plugin's cleanup steps that asked to finish later (herder_nomad.tasks.LaterCleanups)."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from herder import CleanupLater, Task, TaskContext, hookimpl
from herder.app import TaskLifecycle
from herder.testing import DriverHarness
from herder_nomad.tasks import LaterCleanups, NomadTask
from tests.support.waiting import wait_for


class Later:
    """A lifecycle plugin whose cleanup asks, once, to be called again after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls = 0

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        self.calls += 1
        if self.calls == 1:
            raise CleanupLater(self.delay, "waiting for the test")


def nomad_task(driver_harness: Callable[..., DriverHarness], plugin: Later) -> NomadTask:
    harness = driver_harness("raw_exec")
    harness.hooks.add_builtins([("later", plugin)])
    run = harness.task({"command": "/bin/true"})
    run.cleaned_up = True  # the test cleans up through the Nomad side
    return NomadTask(id="task-1", lifecycle=TaskLifecycle(harness.hooks, run.task, run.ctx))


def test_a_step_is_called_again_when_due(driver_harness: Callable[..., DriverHarness]) -> None:
    plugin = Later(0.01)
    running = nomad_task(driver_harness, plugin)
    later = LaterCleanups()
    try:
        report = running.lifecycle.cleanup()
        [(who, step)] = report.later
        later.add(running, who, step)
        wait_for(lambda: plugin.calls == 2, 30, "the step to be called again")
    finally:
        later.close()


def test_a_step_not_due_when_the_plugin_stops_is_given_up_and_said(
        driver_harness: Callable[..., DriverHarness], caplog: pytest.LogCaptureFixture) -> None:
    plugin = Later(3600)
    running = nomad_task(driver_harness, plugin)
    later = LaterCleanups()
    [(who, step)] = running.lifecycle.cleanup().later
    later.add(running, who, step)
    with caplog.at_level(logging.WARNING, logger="herder_nomad.tasks"):
        later.close()
    assert plugin.calls == 1
    assert any("task-1" in r.getMessage() and "given up" in r.getMessage() and "waiting for the test"
               in r.getMessage() for r in caplog.records), caplog.text
