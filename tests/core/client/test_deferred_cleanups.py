"""Cleanup steps deferred by CleanupLater, at the end of a foreground run (``herder run``)."""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from herder import CleanupLater, Task, TaskContext, hookimpl
from herder.client.client import Client
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.running import make_config, run_job
from tests.support.waiting import wait_for

SLOW_STEP = 0.3
"""How long each later call of a step due at once takes (as a removal of an image would)."""
NOT_DUE = 60.0
"""The delay of the step that is not due when the run ends."""

JOB = """
job "later" {
  type = "batch"
  group "g" {
    task "now1" {
      driver = "raw_exec"
      config {
        command = "true"
      }
    }
    task "now2" {
      driver = "raw_exec"
      config {
        command = "true"
      }
    }
    task "soon" {
      driver = "raw_exec"
      config {
        command = "true"
      }
    }
  }
}
"""


class Later:
    """Asks, at each task's first cleanup, to be called again: at once for ``now*`` (the later call
    then takes :data:`SLOW_STEP`), in :data:`NOT_DUE` seconds for ``soon``. Records the later calls' tasks."""

    def __init__(self) -> None:
        self.first: set[str] = set()
        self.again: list[str] = []
        self._lock = threading.Lock()

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        with self._lock:
            first = task.name not in self.first
            self.first.add(task.name)
        if first:
            raise CleanupLater(NOT_DUE if task.name == "soon" else 0.0, f"{task.name} waits")
        if task.name != "soon":
            time.sleep(SLOW_STEP)  # deliberate sleep: the step's own work, which the run must wait out
        with self._lock:
            self.again.append(task.name)


def hooks_with(plugin: Later, data_dir: Path) -> Hooks:
    config = make_config(data_dir)
    hooks = Hooks(load_plugins(config.plugin, config.disabled_plugins))
    hooks.add_builtins([("later", plugin)])
    return hooks


def test_a_foreground_run_runs_the_due_steps_before_it_ends_and_leaves_the_others_stored(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    plugin = Later()
    run = run_job(JOB, data_dir, hooks=hooks_with(plugin, data_dir))
    ended = time.time()
    assert run.status == "complete"
    # Both steps due at once ran before the run let go of the data dir, the second one too although
    # the scheduler's thread was still busy with the first when the run ended.
    assert sorted(plugin.again) == ["now1", "now2"]
    # The step not due was not waited for: it stays in the state database for the next herder.
    config = make_config(data_dir)
    with Client(config, hooks_with(plugin, data_dir)) as client:
        [pending] = client.store.deferred()
        assert (pending.payload["task"], pending.due > ended) == ("soon", True)
        # The next herder on the data dir runs it once due: at once, as it is made overdue here.
        client.store.defer(replace(pending, due=time.time() - 1))
        client.start()
        wait_for(lambda: not client.store.deferred(), what="the next herder on the data dir to run the step")
    assert plugin.again.count("soon") == 1
