"""Fixtures for the rkt driver's tests, against the real rkt on PATH (with the fly stage1 beside it).

Without rkt, root or the fly stage1 the tests are skipped, unless
HERDER_REQUIRE names ``rkt``: then they fail. Each xdist worker keeps one rkt
store (``--dir`` and the config dirs) in a temporary directory, with the
test image fetched once; every test checks that it leaves no pod in it and
nothing mounted under the store or its own temporary directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.require import require, require_driver
from tests.support.waiting import poll

from .helpers import (
    build_aci,
    listed_pods,
    mounts_under,
    processes_rooted_under,
    rkt_binary,
    rkt_for,
    stage1_path,
    store_config,
)


@pytest.fixture(scope="session")
def rkt_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A rkt store of this worker's own, holding the test image ``example.local/busybox:1.0.0``."""
    store = tmp_path_factory.mktemp("rkt-store")
    yield store
    if rkt_binary() is not None and Path(store_config(store)["dir"]).exists():
        rkt = rkt_for(store)
        with contextlib.suppress(Exception):
            rkt.run("gc", "--grace-period=0s")
            rkt.run("image", "gc")
    assert not mounts_under(store), f"mounts left behind: {mounts_under(store)}"


@pytest.fixture(scope="session")
def rkt_plugin_config(rkt_store: Path) -> dict[str, Any]:
    """``[plugin.rkt]`` for the worker's store; the driver is installed, loads and is healthy, the fly
    stage1 is there and the test image is in the store (or the test is skipped)."""
    require("rkt", os.geteuid() == 0, "the rkt driver needs root")
    require("rkt", rkt_binary() is not None, "no rkt on PATH")
    require("rkt", stage1_path() is not None, "no stage1-fly.aci beside the rkt on PATH")
    config = store_config(rkt_store)
    require_driver("rkt", {"rkt": config})
    image = build_aci(rkt_store / "busybox.aci")
    rkt_for(rkt_store).fetch(str(image), insecure=["image"])
    return config


@pytest.fixture(autouse=True)
def no_pod_left_behind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """No pod of the test outlives it, no process chrooted in rkt's store, and nothing stays mounted under
    the store or the test's directory."""
    yield
    if "rkt_plugin_config" not in request.fixturenames:
        return
    store: Path = request.getfixturevalue("rkt_store")
    rkt = rkt_for(store)
    poll(lambda: not processes_rooted_under(store))  # a pod killed at the test's end may be on its way out
    processes = processes_rooted_under(store)
    pods = listed_pods(rkt)
    mounted = mounts_under(tmp_path) + mounts_under(store)
    for pid in processes:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for uuid, _ in pods:  # leave the store clean for the worker's next test
        with contextlib.suppress(Exception):
            rkt.stop(uuid, force=True)
            rkt.wait_exited(uuid, 5)
    with contextlib.suppress(Exception):
        rkt.run("gc", "--grace-period=0s")
    assert not pods, f"pods left behind: {pods}"
    assert not processes, f"processes of pods left behind: {processes}"
    assert not mounted, f"mounts left behind: {mounted}"
