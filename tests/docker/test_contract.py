"""The docker driver against the driver conformance kit (herder.testing), with the test image."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herder import TaskHandle
from herder.plugins.loader import load_plugins
from herder.testing import DriverContract
from tests.support.require import require

from .helpers import IMAGE, PAUSE_IMAGE, Docker, docker, sh

ALLOC_DIR_LABEL = "herder.alloc_dir"


class TestDockerContract(DriverContract):
    driver = "docker"
    # The test images are shared with the other tests; there is no registry to pull Nomad's pause image from.
    plugin_config = {"cleanup_image": False, "infra_image": PAUSE_IMAGE}

    docker: Docker

    @pytest.fixture(autouse=True)
    def _engine(self, docker_client: Docker, docker_driver: str, busybox_image: str, pause_image: str,
                tmp_path: Path) -> Iterator[None]:
        """The daemon and the test images are there (or the test is skipped, or failed under HERDER_REQUIRE);
        no container of the test's tasks (those with a task directory under ``tmp_path``) or pause container
        of its allocations outlives it."""
        self.docker = docker_client
        yield
        # The list's summaries: inspecting each container would race with the other tests removing theirs.
        left = [summary["Id"] for summary in docker_client.api.containers(all=True)
                if any(str(mount.get("Source", "")).startswith(str(tmp_path)) for mount in summary.get("Mounts") or [])
                or (summary.get("Labels") or {}).get(ALLOC_DIR_LABEL, "").startswith(str(tmp_path))]
        for container in left:
            with contextlib.suppress(docker.errors.NotFound):
                docker_client.api.remove_container(container, force=True)
        assert not left, f"containers left behind: {left}"

    def shell(self, script: str) -> dict[str, Any]:
        return sh(script)

    def listens_on_port(self, label: str) -> dict[str, Any]:
        return {"image": IMAGE, "command": "httpd", "args": ["-f", "-p", f"${{NOMAD_PORT_{label}}}", "-h", "/local"]}

    def connects_to(self, port: int) -> dict[str, Any]:
        return {"image": IMAGE, "command": "nc", "args": ["127.0.0.1", str(port)]}

    def invalid_configs(self) -> list[tuple[dict[str, Any], str]]:
        return [({"image": 5}, "config.image"), ({}, "config.image"), ({"image": IMAGE, "args": "x"}, "config.args"),
                ({"image": IMAGE, "port_map": {"http": "x"}}, "config.port_map.http")]

    def broken_plugin_config(self) -> dict[str, Any]:
        return {**self.plugin_config, "endpoint": "unix:///nonexistent/docker.sock"}

    def host_pids(self, handle: TaskHandle, pids: tuple[int, ...]) -> list[int]:
        """The container's processes, as ``docker top`` lists them with the host's pids."""
        top = self.docker.api.top(handle.id)
        column = top["Titles"].index("PID")
        return [int(row[column]) for row in top["Processes"]]

    def require(self, available: bool, reason: str) -> None:
        require("docker", available, reason)


def test_the_kit_runs_against_the_installed_distribution() -> None:
    record = load_plugins().record("docker")
    assert record is not None and record.distribution == "herder-docker"
