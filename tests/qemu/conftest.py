"""Fixtures for the qemu driver's tests, against the real QEMU (TCG) and a guest built at test time.

Without QEMU, a kernel in /boot or a static busybox the tests are skipped,
unless HERDER_REQUIRE names ``qemu``: then they fail. Every test checks that
no QEMU it started (one running in a directory under its temporary
directory) outlives it, and kills any that does.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.processes import wait_until_gone
from tests.support.require import require

from .helpers import BUSYBOX, Guest, build_guest, kernels


@pytest.fixture(scope="session")
def qemu_driver() -> str:
    """The herder-qemu distribution is installed, loads, and its fingerprint is healthy."""
    plugins = load_plugins()
    record = plugins.record("qemu")
    require("qemu", record is not None and not record.error,
            f"the qemu driver is not installed or did not load: {record.error if record else 'no entry point'}")
    fingerprint = Hooks(plugins).fingerprint("qemu")
    require("qemu", fingerprint.detected and fingerprint.healthy,
            f"the qemu driver is not available: {fingerprint.description}")
    return "qemu"


@pytest.fixture(scope="session")
def guest(qemu_driver: str, tmp_path_factory: pytest.TempPathFactory) -> Guest:
    """The test guest, built once per test run (every xdist worker shares it)."""
    require("qemu", bool(kernels()), "no kernel in /boot (Debian: linux-image-amd64)")
    require("qemu", BUSYBOX.is_file(), f"no {BUSYBOX} (Debian: busybox-static)")
    return build_guest(tmp_path_factory.getbasetemp().parent / "herder-qemu-guest")


@pytest.fixture(autouse=True)
def no_machine_left_behind(tmp_path: Path) -> Iterator[None]:
    """No QEMU of the test's tasks outlives the test (a failed test's too: it is killed, and the test fails)."""
    yield
    left = {pid: command for pid, command in wait_until_gone(tmp_path, timeout=5).items() if "qemu-system" in command}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"virtual machines left behind: {left}"
