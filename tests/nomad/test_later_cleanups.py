"""The Nomad plugin's cleanup steps left for later: kept with their task in the plugin's state.db."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from herder import CleanupLater, Task, TaskContext, hookimpl
from herder.app.nomad import STATE_FILE, DeferredCleanups, Store, TaskLifecycle
from herder.testing import DriverHarness
from herder_nomad import tasks
from herder_nomad.tasks import NomadTask
from herder_nomad.wire import driver_pb2
from tests.support.waiting import wait_for


class Later:
    """A lifecycle plugin whose cleanup asks, once, to be called again after ``delay`` seconds;
    it records each call's task, allocation and ``created``."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls: list[tuple[str, str, list[tuple[str, str]]]] = []

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        self.calls.append((task.name, ctx.alloc_id, ctx.created.items()))
        if len(self.calls) == 1:
            raise CleanupLater(self.delay, "waiting for the test")


def nomad_task(driver_harness: Callable[..., DriverHarness], plugin: Later, alloc_dir: Path) -> NomadTask:
    harness = driver_harness("raw_exec")
    harness.hooks.add_builtins([("later", plugin)])
    run = harness.task({"command": "/bin/true"})
    run.cleaned_up = True  # the test cleans up through the Nomad side
    run.ctx.created.add("volume", "v1")
    config = driver_pb2.TaskConfig(id="task-1", name=run.task.name, alloc_id=run.ctx.alloc_id,
                                   alloc_dir=str(alloc_dir), env={"NOMAD_ALLOC_INDEX": "0"})
    return NomadTask(id="task-1", lifecycle=TaskLifecycle(harness.hooks, run.task, run.ctx), config=config)


def scheduler(data_dir: Path, running: NomadTask) -> DeferredCleanups:
    """The deferred cleanups of one plugin process on ``data_dir`` (started)."""
    later = DeferredCleanups(Store(data_dir / STATE_FILE), running.lifecycle.hooks,
                             lambda stored: tasks.rebuild(stored, running.ctx.supervisor))
    later.start()
    return later


def test_a_step_is_called_again_when_due_with_its_task_and_created(
        driver_harness: Callable[..., DriverHarness], tmp_path: Path) -> None:
    plugin = Later(0.01)
    running = nomad_task(driver_harness, plugin, tmp_path / "alloc")
    later = scheduler(tmp_path, running)
    try:
        tasks.cleanup(running, later)
        wait_for(lambda: len(plugin.calls) == 2, 30, "the step to be called again")
        assert plugin.calls[1] == plugin.calls[0] == (running.task.name, running.ctx.alloc_id, [("volume", "v1")])
        wait_for(lambda: not later.store.deferred(), 30, "the step done to leave the state database")
    finally:
        later.stop()
        later.store.close()


def test_a_step_not_due_when_the_plugin_stops_is_made_by_the_next_plugin_process(
        driver_harness: Callable[..., DriverHarness], tmp_path: Path) -> None:
    plugin = Later(0.5)
    running = nomad_task(driver_harness, plugin, tmp_path / "alloc")
    first = scheduler(tmp_path, running)
    try:
        tasks.cleanup(running, first)
    finally:
        first.stop()
        first.store.close()
    assert len(plugin.calls) == 1
    # The step keeps the task's environment (Nomad's TaskConfig): no other user reads it.
    assert (tmp_path / STATE_FILE).stat().st_mode & 0o077 == 0
    # The next plugin process knows nothing of the task: the step's row tells it all.
    following = scheduler(tmp_path, running)
    try:
        [stored] = following.store.deferred()
        assert stored.key == f"task-1/{stored.payload['phase']}"
        wait_for(lambda: len(plugin.calls) == 2, 30, "the next plugin process to call the step")
        assert plugin.calls[1] == (running.task.name, running.ctx.alloc_id, [("volume", "v1")])
    finally:
        following.stop()
        following.store.close()
