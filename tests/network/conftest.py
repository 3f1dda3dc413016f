"""Fixtures of the network tests: namespaces made for a test, and none of them left behind."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.network import require_networking


@pytest.fixture
def netns() -> Iterator[Path]:
    """A network namespace of the test's own, made as ``ip netns add`` makes one, deleted after it."""
    require_networking()
    name = f"herder-test-{uuid.uuid4().hex[:12]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        yield Path("/var/run/netns") / name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True, timeout=30)

