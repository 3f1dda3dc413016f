"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from tests.support.agent import AgentProcess
from tests.support.consul import ConsulAgent, consul_binary
from tests.support.distributions import make_distribution
from tests.support.processes import wait_until_gone

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def no_process_left_behind(tmp_path: Path) -> Iterator[None]:
    """Every test: no task, supervisor or herder process of its own outlives it.

    The supervisor of a data dir leaves by itself once nothing is left to
    supervise; anything else still running here was leaked.
    """
    yield
    left = wait_until_gone(tmp_path)
    assert not left, f"processes left behind: {left}"


SEED_VARIABLE = "HERDER_TEST_SEED"


@pytest.fixture
def seed() -> int:
    """The seed of the test's random schedule: ``$HERDER_TEST_SEED`` if set, else a fresh one.

    It is printed, so the output of a failing test says how to run the same schedule again.
    """
    value = int(os.environ.get(SEED_VARIABLE) or random.randrange(1 << 32))
    print(f"random schedule: {SEED_VARIABLE}={value} replays it")
    return value


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """A configuration that keeps dynamic ports inside 2000-12000, away from other suites."""
    path = tmp_path / "herder.toml"
    path.write_text(f'data_dir = "{tmp_path / "data"}"\n[ports]\nmin = 2000\nmax = 12000\n')
    return path


@pytest.fixture
def site_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path (and PYTHONPATH) where tests install plugin distributions."""
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(path), os.environ.get("PYTHONPATH")])))
    yield path


@pytest.fixture
def install(site_dir: Path) -> Callable[..., Path]:
    """Install a small plugin distribution into ``site_dir``: ``install(name, version, entry_points, modules)``."""

    def _install(name: str, version: str, entry_points: Mapping[str, Mapping[str, str]],
                 modules: Mapping[str, str]) -> Path:
        return make_distribution(site_dir, name, version, entry_points, modules)

    return _install


@pytest.fixture
def herder() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run the ``herder`` command line in a subprocess (the environment of the test, PYTHONPATH included)."""

    def _run(*args: str, timeout: float = 60, **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "herder", *args], capture_output=True, text=True,
                              timeout=timeout, **kwargs)  # type: ignore[call-overload, no-any-return]

    return _run


@pytest.fixture(scope="module")
def shared_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """A ``herder agent`` (raw_exec enabled) shared by the tests of a module: each uses job names of its own."""
    process = AgentProcess(tmp_path_factory.mktemp("agent"))
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


# -- a real Consul agent, for the services tests ----------------------------------


@pytest.fixture(scope="session")
def consul_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsulAgent]:
    consul_binary()
    agent = ConsulAgent(tmp_path_factory.mktemp("consul")).start()
    yield agent
    agent.stop()


@pytest.fixture
def consul(consul_session: ConsulAgent) -> Iterator[ConsulAgent]:
    """The session's agent, emptied of services after the test."""
    yield consul_session
    for service_id in consul_session.services():
        httpx.put(f"{consul_session.url}/v1/agent/service/deregister/{service_id}", timeout=5)


@pytest.fixture
def own_consul(tmp_path: Path) -> Iterator[ConsulAgent]:
    """An agent of this test's own, which it may stop and start again."""
    consul_binary()
    agent = ConsulAgent(tmp_path.parent / f"{tmp_path.name}-consul").start()
    yield agent
    agent.stop()
