"""The rkt driver against the driver conformance kit (herder.testing), with the real rkt and the fly stage1."""

from __future__ import annotations

from typing import Any

import pytest

from herder.plugins.loader import load_plugins
from herder.testing import DriverContract
from tests.support.require import require

from .helpers import sh


class TestRktContract(DriverContract):
    driver = "rkt"

    @pytest.fixture(autouse=True)
    def _store(self, rkt_plugin_config: dict[str, Any]) -> None:
        """rkt works here (or the test is skipped, or failed under HERDER_REQUIRE), with this worker's store."""
        type(self).plugin_config = rkt_plugin_config

    def shell(self, script: str) -> dict[str, Any]:
        return sh(script)

    def listens_on_port(self, label: str) -> dict[str, Any]:
        # fly shares the host's network: the app binds the host port itself
        return sh(f"exec httpd -f -p ${{NOMAD_PORT_{label}}} -h /local")

    def connects_to(self, port: int) -> dict[str, Any]:
        return sh(f"nc 127.0.0.1 {port} </dev/null")

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        image = "example.local/busybox:1.0.0"
        return [({}, "config.image"), ({"image": 5}, "config.image"), ({"image": ""}, "config.image"),
                ({"image": image, "args": [1]}, "config.args[0]"),
                ({"image": image, "insecure_options": ["everything"]}, "config.insecure_options[0]"),
                ({"image": image, "port_map": {"http": 8080}}, "config.port_map.http"),
                ({"image": image, "volumes": ["relative"]}, "config.volumes[0]"),
                ({"image": image, "debug": "yes"}, "config.debug"), ({"image": image, "bogus": 1}, "config.bogus")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {"rkt": "/nonexistent/rkt"}

    def require(self, available: bool, reason: str) -> None:
        require("rkt", available, reason)


def test_the_kit_runs_against_the_installed_distribution() -> None:
    record = load_plugins().record("rkt")
    assert record is not None and record.distribution == "herder-rkt"
