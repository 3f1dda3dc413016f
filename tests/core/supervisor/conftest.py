"""Fixtures of the supervisor's tests: clients on the test's data dir, and no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from herder.supervisor import ProcInfo, Supervisor
from herder.supervisor.proctree import Cgroup
from tests.core.supervisor.helpers import MARK, PATH, cgroups_of, kill_all, marked_pids, supervisor_pids
from tests.support.waiting import wait_for


@pytest.fixture
def mark() -> str:
    """The value of :data:`MARK` in the environment of every process this test starts."""
    return uuid.uuid4().hex


@pytest.fixture(autouse=True)
def no_leftovers(data_dir: Path, mark: str) -> Iterator[None]:
    """After the test (and its clients' :meth:`~Supervisor.close`), the supervisor of its data dir
    has exited and no process it started, nor any cgroup, is left; leftovers are killed and fail the test."""
    yield

    def leftovers() -> list[int]:
        return supervisor_pids(data_dir) + marked_pids(mark)

    try:
        wait_for(lambda: not leftovers(), what="no supervisor or task left")
    except AssertionError:
        pids = leftovers()
        kill_all(pids)
        pytest.fail(f"processes left behind: {pids}")
    cgroups = cgroups_of(data_dir)
    for cgroup in cgroups:
        Cgroup(cgroup).release()
    assert not cgroups, f"cgroups left behind: {cgroups}"


@pytest.fixture
def start_supervisor(data_dir: Path) -> Callable[..., None]:
    """``start_supervisor(*options)``: start the supervisor of the test's data dir with command line options
    (its clients then connect to it)."""

    def _start(*options: str) -> None:
        subprocess.run([sys.executable, "-m", "herder.supervisor", *options, str(data_dir)], check=True, timeout=30)

    return _start


@pytest.fixture
def task_env(mark: str) -> dict[str, str]:
    """The environment of a task."""
    return {"PATH": PATH, MARK: mark}


@pytest.fixture
def client_env(mark: str) -> dict[str, str]:
    """The environment of a client process a test starts (``python -c ...``)."""
    return {**os.environ, MARK: mark}


@pytest.fixture
def logs_dir(tmp_path: Path) -> Path:
    path = tmp_path / "logs"
    path.mkdir()
    return path


@pytest.fixture
def connect(data_dir: Path, no_leftovers: None) -> Iterator[Callable[..., Supervisor]]:
    """``connect(**options)``: a connected :class:`Supervisor` of the test's data dir, closed after the test."""
    clients: list[Supervisor] = []

    def _connect(**options: Any) -> Supervisor:
        supervisor = Supervisor(data_dir, **options)
        clients.append(supervisor)
        supervisor.connect()
        return supervisor

    yield _connect
    for supervisor in clients:
        supervisor.close()


@pytest.fixture
def spawn(logs_dir: Path, task_env: dict[str, str]) -> Callable[..., ProcInfo]:
    """``spawn(supervisor, id, argv, **options)``: a task logging into ``logs_dir`` as ``web``."""

    def _spawn(supervisor: Supervisor, id: str, argv: list[str], **options: Any) -> ProcInfo:
        defaults: dict[str, Any] = {
            "env": task_env, "cwd": None, "logs_dir": logs_dir, "task": "web", "max_files": 10,
            "max_file_size": 10, "stop_signal": signal.SIGINT, "kill_timeout": 5.0,
        }
        return supervisor.spawn(id, argv, **{**defaults, **options})

    return _spawn
