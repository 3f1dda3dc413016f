"""The qemu driver against the driver conformance kit (herder.testing), with the real QEMU.

A virtual machine has no shell the kit can use, so the scenarios are guests
running a script (see :mod:`tests.qemu.helpers`): the guest writes its pids
to ``/dev/ttyS1``, a serial port QEMU writes to ``$READY_FILE``, and the kit
checks that QEMU ends (the host cannot see the guest's processes). There is
no exec: herder says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import pytest

from herder import TaskHandle
from herder.plugins.loader import load_plugins
from herder.testing import DriverContract
from tests.support.require import require

from .helpers import Guest

pytestmark = pytest.mark.slow  # most of the kit's tests boot a guest

READY_PORT = ("-serial", "file:${READY_FILE}")
"""The guest's /dev/ttyS1, written to the kit's ready file."""
RUNS = 'sleep 3600 & echo $$ $! > /dev/ttyS1; wait'
GATEWAY = "10.0.2.2"
"""QEMU's side of its user-mode network, as the guest sees it."""


class TestQemuContract(DriverContract):
    driver = "qemu"
    supports_exec = False
    supports_exec_session = False
    supports_stats = False  # stats() tells the virtual machine's memory and CPU, not the guest task's
    _guest: Guest

    @pytest.fixture(autouse=True)
    def _built(self, guest: Guest) -> None:
        """QEMU works here and the guest is built (or the test is skipped, or failed under HERDER_REQUIRE)."""
        self._guest = guest

    @property
    def plugin_config(self) -> Mapping[str, Any]:  # type: ignore[override]
        return self._guest.plugin_config if hasattr(self, "_guest") else {}

    def exits_with(self, code: int) -> dict[str, Any]:
        assert code == 0 or code % 2, "QEMU's isa-debug-exit gives odd exit codes only"
        return self._guest.config(f"exit {code}")

    def prints(self, text: str) -> dict[str, Any]:
        return self._guest.config(f"echo '{text}'")

    def runs_until_killed(self) -> dict[str, Any]:
        return self._guest.config(RUNS, args=READY_PORT)

    def ignores_stop_signal(self) -> dict[str, Any]:
        """The guest ignores its power button (no acpid): after kill_timeout, QEMU is killed."""
        return self._guest.config(f"killall acpid; {RUNS}", args=READY_PORT, graceful_shutdown=True)

    def listens_on_port(self, label: str) -> dict[str, Any]:
        return self._guest.config(port_map={label: 80})

    def connects_to(self, port: int) -> dict[str, Any]:
        """QEMU's user-mode network takes the guest's connections to its gateway to QEMU's own 127.0.0.1."""
        return self._guest.config(f"echo hello | nc {GATEWAY} {port}")

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        return [({}, "config.image_path"), ({"image_path": 5}, "config.image_path"),
                ({"image_path": "x.img", "accelerator": "hvf"}, "config.accelerator"),
                ({"image_path": "x.img", "port_map": {"http": "80"}}, "config.port_map.http"),
                ({"image_path": "x.img", "args": [1]}, "config.args[0]"),
                ({"image_path": "x.img", "graceful_shutdown": "yes"}, "config.graceful_shutdown"),
                ({"image_path": "x.img", "bogus": 1}, "config.bogus")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {"emulator": "/nonexistent/qemu-system-x86_64"}

    def host_pids(self, handle: TaskHandle, pids: tuple[int, ...]) -> Collection[int]:
        return []  # the guest's processes are not the host's

    def require(self, available: bool, reason: str) -> None:
        require("qemu", available, reason)


def test_the_kit_runs_against_the_installed_distribution() -> None:
    record = load_plugins().record("qemu")
    assert record is not None and record.distribution == "herder-qemu"
