"""The exec driver against the driver conformance kit (herder.testing), with the real runc."""

from __future__ import annotations

from typing import Any

import pytest

from herder import TaskHandle
from herder.plugins.loader import load_plugins
from herder.testing import DriverContract
from tests.support.require import require

from .helpers import runc, sh


class TestExecContract(DriverContract):
    driver = "exec"

    @pytest.fixture(autouse=True)
    def _runc(self, exec_driver: str) -> None:
        """runc works here (or the test is skipped, or failed under HERDER_REQUIRE)."""

    def shell(self, script: str) -> dict[str, Any]:
        return sh(script)

    def listens_on_port(self, label: str) -> dict[str, Any]:
        return {"command": "/bin/busybox", "args": ["httpd", "-f", "-p", f"${{NOMAD_PORT_{label}}}", "-h", "/local"]}

    def connects_to(self, port: int) -> dict[str, Any]:
        return {"command": "/bin/busybox", "args": ["nc", "127.0.0.1", str(port)]}

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        return [({"command": 5}, "config.command"), ({}, "config.command"), ({"command": ""}, "config.command"),
                ({"command": "true", "args": [1]}, "config.args[0]"), ({"command": "true", "bogus": 1}, "config.bogus")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {"runc": "/nonexistent/runc"}

    def host_pids(self, handle: TaskHandle, pids: tuple[int, ...]) -> list[int]:
        """The container's processes with the host's pids, as ``runc ps`` lists them."""
        return runc().pids(handle.id)

    def require(self, available: bool, reason: str) -> None:
        require("exec", available, reason)


def test_the_kit_runs_against_the_installed_distribution() -> None:
    record = load_plugins().record("exec")
    assert record is not None and record.distribution == "herder-exec"
