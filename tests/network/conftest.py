"""Fixtures of the network tests: namespaces made for a test, and nothing of any allocation's network
left behind by a test."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.network import leftovers, remove_leftovers, require_networking


@pytest.fixture(autouse=True)
def networking() -> None:
    require_networking()


@pytest.fixture(autouse=True)
def no_network_left(tmp_path: Path) -> Iterator[None]:
    """After the test (its herder processes ended), no allocation of its data dir left a namespace,
    an iptables rule or a lease; what is left is removed and fails the test."""
    yield
    allocs = tmp_path / "data" / "allocs"
    found = {}
    for alloc in allocs.iterdir() if allocs.exists() else ():
        left = leftovers(alloc.name)
        if left:
            found[alloc.name] = left
            remove_leftovers(alloc.name)
    assert not found, f"left behind: {found}"


@pytest.fixture
def netns() -> Iterator[Path]:
    """A network namespace of the test's own, made as ``ip netns add`` makes one, deleted after it."""
    name = f"herder-test-{uuid.uuid4().hex[:12]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        yield Path("/var/run/netns") / name
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=True, timeout=30)
