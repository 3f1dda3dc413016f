"""Drivers that misbehave: a schema hook that raises, handles whose wait or state raises.

Each is a real distribution, installed and found through its entry point.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from herder import app
from herder.client.config import Config
from tests.support.processes import alive
from tests.support.running import make_config, run_job

BROKEN_SCHEMA = '''
from herder import hookimpl

class Driver:
    def __init__(self, config):
        pass

    @hookimpl
    def herder_driver_task_schema(self):
        raise RuntimeError("schema file missing")

    @hookimpl
    def herder_task_start(self, task, ctx):
        raise NotImplementedError
'''

BROKEN_HANDLE = '''
from herder import hookimpl
from herder.sdk import SupervisedProcess


class BrokenHandle:
    """A real supervised process behind a handle of the protocol alone (no ``on_exit``:
    its ``wait`` is what tells the exit) whose ``broken`` method raises."""

    PROTOCOL = ("wait", "signal", "kill", "stats", "state")

    def __init__(self, handle, broken):
        self._handle = handle
        self._broken = broken
        self.id = handle.id
        self.network = None

    def __getattr__(self, name):
        if name not in self.PROTOCOL:
            raise AttributeError(name)
        if name == self._broken:
            raise RuntimeError(f"{name} broke")
        return getattr(self._handle, name)


class Driver:
    def __init__(self, config):
        self.broken = config["broken"]

    @hookimpl
    def herder_task_start(self, task, ctx):
        handle = SupervisedProcess.spawn(task, ctx, ["sleep", "300"], env=ctx.env, cwd=ctx.task_dir.dir)
        (ctx.task_dir.local_dir / "pid").write_text(str(handle.pid))
        return BrokenHandle(handle, self.broken)
'''


def job(driver: str) -> str:
    return (f'job "j" {{\n group "g" {{\n restart {{\n attempts = 2\n delay = "0s"\n interval = "1m"\n }}\n'
            f' task "t" {{\n driver = "{driver}"\n config {{}}\n }}\n }}\n}}\n')


@pytest.fixture
def broken_schema(install: Callable[..., Path]) -> None:
    install("herder-brokenschema", "0.1", {"herder.drivers": {"brokenschema": "brokenschema:Driver"}},
            {"brokenschema.py": BROKEN_SCHEMA})


def test_a_raising_schema_hook_fails_only_its_driver(broken_schema: None, herder: Callable[..., object],
                                                    tmp_path: Path) -> None:
    other = tmp_path / "other.hcl"
    other.write_text(job("raw_exec").replace("config {}", 'config {\n command = "true"\n }'))
    assert herder("validate", str(other)).returncode == 0  # type: ignore[attr-defined]

    mine = tmp_path / "mine.hcl"
    mine.write_text(job("brokenschema"))
    result = herder("validate", str(mine))
    assert result.returncode == 2  # type: ignore[attr-defined]
    assert "driver 'brokenschema' is broken" in result.stderr  # type: ignore[attr-defined]
    assert "schema file missing" in result.stderr and "Traceback" not in result.stderr  # type: ignore[attr-defined]

    listing = {p["name"]: p for p in json.loads(herder("plugins", "--json").stdout)["plugins"]}  # type: ignore[attr-defined]
    assert listing["brokenschema"]["status"] == "failed"
    assert "schema file missing" in listing["brokenschema"]["error"]
    assert listing["raw_exec"]["status"] == "loaded"


@pytest.mark.parametrize("broken", ["wait", "state"])
def test_a_handle_that_raises_is_killed_and_the_task_fails(broken: str, install: Callable[..., Path],
                                                          data_dir: Path) -> None:
    install("herder-brokenhandle", "0.1", {"herder.drivers": {"brokenhandle": "brokenhandle:Driver"}},
            {"brokenhandle.py": BROKEN_HANDLE})
    config: Config = make_config(data_dir, {"brokenhandle": {"broken": broken}})
    run = run_job(job("brokenhandle"), data_dir, config=config, hooks=app.load_hooks(config))
    assert run.status == "failed"
    types = run.types("t")
    assert types[-3:] == ["Driver Failure", "Terminated", "Not Restarting"], types
    assert ("Started" in types) == (broken == "wait")  # a handle without state is not taken as started
    failure = next(r.event for r in run.events if r.event.type == "Driver Failure")
    assert f"{broken} broke" in failure.message and "internal error" not in failure.message
    assert run.events[-1].event.message == "Error was unrecoverable"
    assert "Restarting" not in types
    [pid_file] = data_dir.glob("allocs/*/t/local/pid")
    assert not alive(int(pid_file.read_text()))
