"""The daemon coming and going: the fingerprint's three answers, and a start that will be retried."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import pytest
from herder_docker.driver import DockerDriver

from herder import RecoverableError, Task, TaskContext, TaskDir


def test_a_daemon_that_goes_away_is_unhealthy_not_undetected(docker_driver: str) -> None:
    driver = DockerDriver({})
    first = driver.herder_driver_fingerprint()
    assert (first.detected, first.healthy) == (True, True)
    driver.config = dataclasses.replace(driver.config, endpoint="unix:///nonexistent/docker.sock")
    gone = driver.herder_driver_fingerprint()
    assert (gone.detected, gone.healthy) == (True, False)
    assert "unix:///nonexistent/docker.sock" in gone.description


def test_a_daemon_never_seen_is_undetected() -> None:
    never = DockerDriver({"endpoint": "unix:///nonexistent/docker.sock"}).herder_driver_fingerprint()
    assert (never.detected, never.healthy) == (False, False)
    assert "cannot reach the Docker daemon at unix:///nonexistent/docker.sock" in never.description


def test_an_unreachable_daemon_at_start_is_recoverable(tmp_path: Path) -> None:
    """Prestart against a daemon that does not answer asks herder to try again later."""
    dirs = {name: tmp_path / name for name in ("dir", "local", "secrets", "tmp", "alloc", "logs")}
    for path in dirs.values():
        path.mkdir()
    ctx = TaskContext(alloc_id="a", alloc_name="j.g[0]", alloc_index=0, job_name="j", group_name="g",
                      task_name="t", env={}, ports=[], stdout=io.BytesIO(), stderr=io.BytesIO(),
                      task_dir=TaskDir(dirs["dir"], dirs["local"], dirs["secrets"], dirs["tmp"], dirs["alloc"],
                                       dirs["logs"]))
    driver = DockerDriver({"endpoint": "unix:///nonexistent/docker.sock"})
    with pytest.raises(RecoverableError, match="cannot reach the Docker daemon at unix:///nonexistent"):
        driver.herder_task_prestart(Task(name="t", driver="docker", config={"image": "herder-test/busybox:1"}), ctx)
