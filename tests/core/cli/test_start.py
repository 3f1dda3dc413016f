"""The commands that run no task start without importing what they do not use.

What ``herder job status`` imports is what it costs to start (bench/cli_start.py
measures the time): not the agent's server, the client, the plugins or the job
parser, and no HTTP library beyond the standard library's.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.consul import free_ports

HEAVY = ("fastapi", "uvicorn", "starlette", "pydantic", "httpx", "rich", "herder.agent", "herder.app",
         "herder.client", "herder.plugins", "herder.jobspec", "herder.state", "herder.supervisor")


def imported(*args: str) -> set[str]:
    """Every module ``herder ARGS...`` imports, against an agent that is not there."""
    [port] = free_ports(1)
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "herder", *args], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "HERDER_ADDR": f"http://127.0.0.1:{port}"})
    modules = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "herder.cli.main" in modules, done.stderr
    return modules


@pytest.mark.parametrize("args", [("--version",), ("job", "status"), ("job", "stop", "x"), ("alloc", "status", "x"),
                                  ("alloc", "logs", "x", "t"), ("alloc", "exec", "x", "t", "true")])
def test_a_command_that_talks_to_the_agent_imports_nothing_heavy(args: tuple[str, ...]) -> None:
    modules = imported(*args)
    assert not {m for m in modules if m.startswith(HEAVY)}


def test_version_does_not_look_through_the_installed_distributions() -> None:
    assert "importlib.metadata" not in imported("--version")
