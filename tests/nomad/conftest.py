"""Fixtures of the Nomad tests: the real ``nomad`` on PATH, with herder's plugin in its plugin_dir."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.nomad.helpers import PLUGIN, NomadCluster, unmount_under
from tests.support.processes import wait_until_gone
from tests.support.require import require


@pytest.fixture
def nomad_root(tmp_path: Path) -> Path:
    require("nomad", shutil.which("nomad") is not None, "no nomad on PATH")
    require("nomad", PLUGIN.exists(), f"herder-nomad is not installed ({PLUGIN} is missing)")
    return tmp_path / "nomad"


@pytest.fixture
def cluster(nomad_root: Path) -> Iterator[NomadCluster]:
    """Agents are added by the test; all are stopped, and their allocations collected, afterwards."""
    nomad = NomadCluster(nomad_root)
    try:
        yield nomad
    finally:
        nomad.close()
        mounts = unmount_under(nomad_root)
        # Whatever a failed test left running is reported, and killed so that it does not outlive the run.
        processes = wait_until_gone(nomad_root)
        for pid in processes:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        assert not mounts, f"mounts left behind: {mounts}"
        assert not processes, f"processes left behind: {processes}"


# The docker task's image: the docker suite's own fixtures (built from the host's busybox, never pulled).
from tests.docker.conftest import busybox_image, docker_client, docker_driver, unique_image  # noqa: E402, F401
