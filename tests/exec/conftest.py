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

from tests.support.require import require_driver

from .helpers import containers_under, runc


@pytest.fixture(scope="session")
def exec_driver() -> str:
    """The herder-exec distribution is installed, loads, and its fingerprint is healthy."""
    require_driver("exec")
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
