"""The fingerprint's three answers: healthy, never seen (undetected), seen and gone (unhealthy)."""

from __future__ import annotations

import dataclasses

from herder_docker.driver import DockerDriver


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
