"""One script of a task's life for every front end: the same task, driven by herder's task runner (a
foreground run), by the conformance kit's harness and by the Nomad plugin's task calls (in process),
calls the same hooks in the same order and emits the same events."""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from herder.app.nomad import STATE_FILE, DeferredCleanups, Hooks, Store
from herder.plugins.loader import load_plugins
from herder.testing import DriverHarness
from herder_nomad import cty
from herder_nomad.driver import HerderDriver
from herder_nomad.wire import driver_pb2
from tests.support.running import make_config, start_job
from tests.support.testplugins import Recorder

GENEROUS = 30.0
SLEEPER = ["-c", "exec sleep 3600"]
EXEC = ["/bin/sh", "-c", "true"]
SIGNAL = signal.SIGWINCH
"""A signal ``sleep`` ignores: the task runs on after it, until the kill."""
EXPECTED = ["Task Setup", "herder_task_prestart", "Started", "herder_task_poststart", "Signaling",
            "herder_task_prekill", "Killing", "Terminated", "herder_task_exited", "Killed", "herder_task_cleanup"]
"""The hook calls and the events (by type), in order."""


class Plugins:
    """The recording plugin, added to a front end's hooks: it logs every hook call, each event among them."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.recorder = Recorder({"log": str(log)})

    def add_to(self, hooks: Hooks) -> Hooks:
        hooks.add_builtins([("recorder", self.recorder)])
        return hooks

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def calls(self) -> list[str]:
        """The task's hook calls in order, an event as its type."""
        return [line["type"] if line["hook"] == "herder_task_event" else line["hook"]
                for line in self.lines() if line["hook"].startswith("herder_task_")]

    def with_alloc_hooks(self) -> list[str]:
        """The allocation's hooks and the task's, in order (the task's events left out)."""
        return [line["hook"] for line in self.lines() if line["hook"] != "herder_task_event"]

    def allocs(self) -> list[str]:
        """The allocation each allocation hook was called with, by name."""
        return [line["alloc"] for line in self.lines() if line["hook"].startswith("herder_alloc_")]


def through_the_task_runner(plugins: Plugins, data_dir: Path) -> None:
    config = make_config(data_dir)
    hooks = plugins.add_to(Hooks(load_plugins(config.plugin, config.disabled_plugins)))
    job = ('job "j" {\n group "g" {\n task "t" {\n driver = "raw_exec"\n'
           f' config {{\n command = "/bin/sh"\n args = {json.dumps(SLEEPER)}\n }}\n }}\n }}\n}}\n')
    run, wait = start_job(job, data_dir, config=config, hooks=hooks)
    run.wait_for("Started", "t", timeout=GENEROUS)
    runner = run.runner.allocs[0].tasks[0]
    assert runner.exec(EXEC, GENEROUS).exit_code == 0
    runner.signal(SIGNAL)
    runner.kill()
    wait(GENEROUS)


def through_the_harness(plugins: Plugins, harness: DriverHarness) -> None:
    plugins.add_to(harness.hooks)
    run = harness.task({"command": "/bin/sh", "args": SLEEPER})
    run.start()
    assert run.exec(EXEC, GENEROUS).exit_code == 0
    run.signal(SIGNAL)
    run.kill()
    assert run.wait(GENEROUS) is not None
    assert run.cleanup() == []


class Aborted(Exception):
    pass


class Context:
    """Enough of a gRPC servicer context for the plugin's calls made in process."""

    def is_active(self) -> bool:
        return True

    def abort(self, code: grpc.StatusCode, message: str) -> None:
        raise Aborted(f"{code}: {message}")


def nomad_plugin(plugins: Plugins, data_dir: Path) -> HerderDriver:
    """A plugin process, configured as ``SetConfig`` would, keeping its state in ``data_dir``."""
    plugin = HerderDriver()
    plugin.data_dir = data_dir
    plugin.hooks = plugins.add_to(Hooks(load_plugins({"raw_exec": {"enabled": True}})))
    plugin.data_dir.mkdir(exist_ok=True)
    plugin.later = DeferredCleanups(Store(plugin.data_dir / STATE_FILE), plugin.hooks, lambda stored: None)
    return plugin


def task_config(tmp_path: Path) -> driver_pb2.TaskConfig:
    """Task ``t`` of allocation ``alloc-1`` (``j.g[0]``), as Nomad's ``StartTask`` gives it."""
    alloc_dir = tmp_path / "alloc"
    for sub in ("t/local", "t/secrets", "t/tmp", "alloc/logs"):
        (alloc_dir / sub).mkdir(parents=True)
    for stream in ("stdout", "stderr"):
        (tmp_path / stream).touch()
    driver_config = cty.encode_object({"driver": ("string", "raw_exec"),
                                       "config": ("dynamic", {"command": "/bin/sh", "args": SLEEPER})})
    return driver_pb2.TaskConfig(id="task-1", name="t", alloc_id="alloc-1", alloc_dir=str(alloc_dir),
                                 job_name="j", task_group_name="g", msgpack_driver_config=driver_config,
                                 stdout_path=str(tmp_path / "stdout"), stderr_path=str(tmp_path / "stderr"),
                                 env={"NOMAD_ALLOC_INDEX": "0"})


def through_the_nomad_plugin(plugins: Plugins, tmp_path: Path) -> None:
    plugin = nomad_plugin(plugins, tmp_path / "data")
    config = task_config(tmp_path)
    context: Any = Context()
    try:
        plugin.StartTask(driver_pb2.StartTaskRequest(task=config), context)
        waited: list[driver_pb2.WaitTaskResponse] = []
        waiter = threading.Thread(target=lambda: waited.append(
            plugin.WaitTask(driver_pb2.WaitTaskRequest(task_id="task-1"), context)))
        waiter.start()
        reply = plugin.ExecTask(driver_pb2.ExecTaskRequest(task_id="task-1", command=EXEC), context)
        assert reply.result.exit_code == 0
        plugin.SignalTask(driver_pb2.SignalTaskRequest(task_id="task-1", signal=SIGNAL.name), context)
        plugin.StopTask(driver_pb2.StopTaskRequest(task_id="task-1", signal="SIGTERM"), context)
        waiter.join(GENEROUS)
        assert waited, "WaitTask did not return once the task was stopped"
        plugin.DestroyTask(driver_pb2.DestroyTaskRequest(task_id="task-1"), context)
    finally:
        plugin.close()


@pytest.fixture
def harness(driver_harness: Callable[..., DriverHarness]) -> DriverHarness:
    return driver_harness("raw_exec", {"enabled": True})


def test_every_front_end_takes_a_task_through_the_same_script(harness: DriverHarness, tmp_path: Path) -> None:
    runner, kit, nomad = (Plugins(tmp_path / f"{name}.log") for name in ("runner", "kit", "nomad"))
    through_the_task_runner(runner, tmp_path / "runner")
    through_the_harness(kit, harness)
    harness.close()  # the harness ends its allocations as it closes
    through_the_nomad_plugin(nomad, tmp_path)
    assert runner.calls() == ["Received", *EXPECTED]  # the agent's own: it took the allocation
    assert kit.calls() == EXPECTED
    assert nomad.calls() == EXPECTED
    hooks = ["herder_alloc_prerun", *[call for call in EXPECTED if call.startswith("herder_")], "herder_alloc_postrun"]
    assert runner.with_alloc_hooks() == kit.with_alloc_hooks() == nomad.with_alloc_hooks() == hooks
    assert runner.allocs() == nomad.allocs() == ["j.g[0]"] * 2


def test_a_task_recovered_by_the_next_plugin_process_gets_no_second_prerun(tmp_path: Path) -> None:
    plugins, config, context = Plugins(tmp_path / "nomad.log"), task_config(tmp_path), Context()
    first = nomad_plugin(plugins, tmp_path / "data")
    try:
        started = first.StartTask(driver_pb2.StartTaskRequest(task=config), context)
    finally:
        first.close()  # the task runs on, for the next plugin process
    second = nomad_plugin(plugins, tmp_path / "data")
    try:
        second.RecoverTask(driver_pb2.RecoverTaskRequest(task_id="task-1", handle=started.handle), context)
    finally:
        second.DestroyTask(driver_pb2.DestroyTaskRequest(task_id="task-1", force=True), context)
        second.close()
    hooks = plugins.with_alloc_hooks()
    assert hooks.count("herder_alloc_prerun") == 1
    assert hooks[0] == "herder_alloc_prerun"
    assert hooks[-2:] == ["herder_task_cleanup", "herder_alloc_postrun"]
