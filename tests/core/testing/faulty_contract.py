"""The contract test module run against driver ``faulty`` (see ``faulty_driver.py``).

``test_kit_catches.py`` writes this source into a pytester directory, with a
subclass ``TestFaulty`` that sets the faults (``plugin_config``) and
``supports_exec``, and runs it.
"""

from __future__ import annotations

import sys
from typing import Any

from herder.testing import DriverContract


class FaultyContract(DriverContract):
    driver = "faulty"

    def shell(self, script: str) -> dict[str, Any]:
        return {"command": "/bin/sh", "args": ["-c", script]}

    def listens_on_port(self, label: str) -> dict[str, Any]:
        return {"command": sys.executable,
                "args": ["-m", "http.server", "--bind", "127.0.0.1", f"${{NOMAD_PORT_{label}}}"]}

    def connects_to(self, port: int) -> dict[str, Any]:
        return {"command": sys.executable,
                "args": ["-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10).close()"]}

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        return [({"command": 5}, "config.command"), ({"command": "true", "args": [1]}, "config.args[0]")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {**self.plugin_config, "shell": "/nonexistent/sh"}
