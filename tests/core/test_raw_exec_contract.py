"""raw_exec against the driver conformance kit (herder.testing)."""

from __future__ import annotations

import sys
from typing import Any

from herder.plugins.loader import load_plugins
from herder.testing import DriverContract
from tests.support.require import require


class TestRawExecContract(DriverContract):
    driver = "raw_exec"

    def shell(self, script: str) -> dict[str, Any]:
        return {"command": "/bin/sh", "args": ["-c", script]}

    def listens_on_port(self, label: str) -> dict[str, Any]:
        return {"command": sys.executable,
                "args": ["-m", "http.server", "--bind", "127.0.0.1", f"${{NOMAD_PORT_{label}}}"]}

    def connects_to(self, port: int) -> dict[str, Any]:
        return {"command": sys.executable,
                "args": ["-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10).close()"]}

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        return [({"command": 5}, "config.command"), ({}, "config.command"), ({"command": ""}, "config.command"),
                ({"command": "true", "args": [1]}, "config.args[0]"), ({"command": "true", "bogus": 1}, "config.bogus")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {"enabled": False}

    def require(self, available: bool, reason: str) -> None:
        require("raw_exec", available, reason)


def test_the_kit_runs_against_the_installed_distribution() -> None:
    record = load_plugins().record("raw_exec")
    assert record is not None and record.distribution == "herder"
