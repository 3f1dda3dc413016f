"""The java driver against the driver conformance kit (herder.testing), with the real JVM: as a plain
process, and isolated in herder-exec's container."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pytest

from herder import TaskHandle
from herder.plugins.loader import load_plugins
from herder.testing import DriverContract
from tests.support.require import require

from .helpers import ISOLATED, PLAIN, app


class JavaContract(DriverContract):
    """The scenarios, each a mode of the test application (tests/java/app/HerderTestApp.java)."""

    driver = "java"

    def exits_with(self, code: int) -> dict[str, Any]:
        return app("exit", str(code))

    def prints(self, text: str) -> dict[str, Any]:
        return app("print", text)

    def runs_until_killed(self) -> dict[str, Any]:
        return app("until-killed")

    def reports_signal(self) -> dict[str, Any]:
        return app("report-signal")

    def ignores_stop_signal(self) -> dict[str, Any]:
        return app("ignore-signals")

    def uses_memory(self, mib: int) -> dict[str, Any]:
        return app("hold-memory", str(mib), jvm_options=["-Xmx256m"])  # a heap of room, in a cgroup too

    def busy_loop(self) -> dict[str, Any]:
        return app("spin")

    def listens_on_port(self, label: str) -> dict[str, Any]:
        return app("serve", f"${{NOMAD_PORT_{label}}}")

    def connects_to(self, port: int) -> dict[str, Any]:
        return app("connect", "127.0.0.1", str(port))

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "config.jar_path"), ({"jar_path": 5}, "config.jar_path"), ({"jar_path": ""}, "config.jar_path"),
                ({"jar_path": "a.jar", "class": "Main"}, "config.jar_path"), ({"class": 1}, "config.class"),
                ({"class": "Main", "class_path": ["a"]}, "config.class_path"),
                ({"class": "Main", "jvm_options": [1]}, "config.jvm_options[0]"),
                ({"jar_path": "a.jar", "args": "x"}, "config.args"),
                ({"jar_path": "a.jar", "pid_mode": "x"}, "config.pid_mode"),
                ({"jar_path": "a.jar", "bogus": 1}, "config.bogus")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {**self.plugin_config, "java": "/nonexistent/java"}

    def require(self, available: bool, reason: str) -> None:
        require("java", available, reason)


class TestPlainContract(JavaContract):
    plugin_config = PLAIN

    @pytest.fixture(autouse=True)
    def _jvm(self, java_driver: str, java_app: None) -> None:
        """A JVM is there (or the test is skipped, or failed under HERDER_REQUIRE)."""


class TestIsolatedContract(JavaContract):
    plugin_config = ISOLATED

    @pytest.fixture(autouse=True)
    def _isolation(self, isolated: dict[str, str], java_app: None) -> None:
        """herder-exec is installed and can isolate (or the test is skipped)."""

    def host_pids(self, handle: TaskHandle, pids: tuple[int, ...]) -> Collection[int]:
        """The container's processes with the host's pids, as ``runc ps`` lists them."""
        from tests.exec.helpers import runc

        return runc().pids(handle.id)


def test_the_kit_runs_against_the_installed_distribution() -> None:
    record = load_plugins().record("java")
    assert record is not None and record.distribution == "herder-java"
