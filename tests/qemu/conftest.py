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

from tests.support.processes import wait_until_gone
from tests.support.require import require, require_driver

from .helpers import BUSYBOX, Guest, build_guest, kernels, readable_cache, readable_tmp


@pytest.fixture(scope="session")
def qemu_driver() -> str:
    """The herder-qemu distribution is installed, loads, and its fingerprint is healthy."""
    require_driver("qemu")
    return "qemu"


@pytest.fixture(scope="session")
def guest(qemu_driver: str) -> Guest:
    """The test guest, built once per test run (every xdist worker shares it)."""
    require("qemu", bool(kernels()), "no kernel in /boot (Debian: linux-image-amd64)")
    require("qemu", BUSYBOX.is_file(), f"no {BUSYBOX} (Debian: busybox-static)")
    return build_guest(readable_cache())


@pytest.fixture
def readable_dir() -> Iterator[Path]:
    """A directory QEMU, as ``nobody``, may read, for the test (see :func:`readable_tmp`)."""
    with readable_tmp() as directory:
        yield directory


@pytest.fixture(autouse=True)
def no_machine_left_behind(tmp_path: Path) -> Iterator[None]:
    """No QEMU of the test's tasks outlives the test (a failed test's too: it is killed, and the test fails)."""
    yield
    left = {pid: command for pid, command in wait_until_gone(tmp_path).items() if "qemu-system" in command}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"virtual machines left behind: {left}"
