"""Fixtures for the exec driver's tests, against the real runc.

Without runc, root or a working cgroup setup the tests are skipped, unless
HERDER_REQUIRE names ``exec``: then they fail. Every test checks that no
runc container whose bundle is under its temporary directory outlives it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.require import require

from .helpers import containers_under, runc


@pytest.fixture(scope="session")
def exec_driver() -> str:
    """The herder-exec distribution is installed, loads, and its fingerprint is healthy."""
    plugins = load_plugins()
    record = plugins.record("exec")
    require("exec", record is not None and not record.error,
            f"the exec driver is not installed or did not load: {record.error if record else 'no entry point'}")
    fingerprint = Hooks(plugins).fingerprint("exec")
    require("exec", fingerprint.detected and fingerprint.healthy,
            f"the exec driver is not available: {fingerprint.description}")
    return "exec"


@pytest.fixture(autouse=True)
def no_container_left_behind(tmp_path: Path) -> Iterator[None]:
    """No container of the test's tasks (a bundle under ``tmp_path``) outlives the test."""
    yield
    left = containers_under(tmp_path)
    for container in left:
        with contextlib.suppress(Exception):
            runc().delete(container)
    assert not left, f"containers left behind: {left}"
