"""``kill_timeout`` and ``shutdown_delay``: capped by ``[client] max_kill_timeout``, and a delay cut
short by a second stop, with real raw_exec processes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from herder.client.config import ClientConfig
from herder.client.task_runner import cap_kill_times
from herder.model import Task
from tests.support.running import make_config, start_job

JOB = """
job "j" {
  group "g" {
    task "t" {
      driver         = "raw_exec"
      shutdown_delay = "1h"
      kill_timeout   = "1h"
      config {
        command = "/bin/sh"
        args    = ["-c", "%s"]
      }
    }
  }
}
"""


@pytest.mark.parametrize(("kill_timeout", "shutdown_delay", "ceiling", "expected", "details"), [
    (5.0, 0.0, 30.0, (5.0, 0.0), {}),
    (60.0, 0.0, 30.0, (30.0, 0.0), {"requested_kill_timeout": 60.0, "max_kill_timeout": 30.0}),
    (5.0, 3600.0, 30.0, (5.0, 30.0), {"requested_shutdown_delay": 3600.0, "max_kill_timeout": 30.0}),
    (60.0, 3600.0, None, (60.0, 3600.0), {}),
])
def test_cap_kill_times(kill_timeout: float, shutdown_delay: float, ceiling: float | None,
                        expected: tuple[float, float], details: dict[str, float]) -> None:
    task = Task(name="t", driver="raw_exec", kill_timeout=kill_timeout, shutdown_delay=shutdown_delay)
    capped, noted = cap_kill_times(task, ceiling)
    assert (capped.kill_timeout, capped.shutdown_delay) == expected
    assert noted == details


def test_the_ceiling_caps_a_task_that_ignores_its_stop_signal(data_dir: Path) -> None:
    config = dataclasses.replace(make_config(data_dir), client=ClientConfig(max_kill_timeout=0.5))
    run, wait = start_job(JOB % "trap '' INT TERM; while :; do sleep 1; done", data_dir, config=config)
    run.wait_for("Started", "t")
    run.runner.stop()
    assert wait(60) == "stopped"
    killing = run.wait_for("Killing", "t").event
    assert killing.details["kill_timeout"] == 0.5
    assert killing.details["requested_kill_timeout"] == killing.details["requested_shutdown_delay"] == 3600.0
    assert run.wait_for("Waiting for shutdown delay", "t").event.details["shutdown_delay"] == 0.5


def test_a_second_stop_ends_the_shutdown_delay(data_dir: Path) -> None:
    config = dataclasses.replace(make_config(data_dir), client=ClientConfig(max_kill_timeout=7200))
    run, wait = start_job(JOB % "exec sleep 3600", data_dir, config=config)
    run.wait_for("Started", "t")
    run.runner.stop()
    run.wait_for("Waiting for shutdown delay", "t")
    run.runner.stop()
    assert wait(60) == "stopped"  # not an hour later
    assert run.types("t")[-3:] == ["Killing", "Terminated", "Killed"]
