"""The scheduler's entry point for a replacement allocation: the same version, group and index, and
in a deployment that placed the allocation it replaces, in its place there, written with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from herder.client import deployments
from herder.client.client import Client, JobSource
from herder.client.deployments import Deployment
from herder.client.versions import Version
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.running import make_config
from tests.support.waiting import wait_for

JOB = """
job "web" {
  update {
    health_check     = "manual"
    min_healthy_time = "0s"
  }
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "sleep"
        args    = ["300"]
      }
      kill_timeout = "1s"
    }
  }
}
"""


def test_a_replacement_takes_the_place_of_the_allocation_it_replaces_in_its_deployment(tmp_path: Path) -> None:
    config = make_config(tmp_path / "data", {"raw_exec": {"enabled": True}})
    with Client(config, Hooks(load_plugins(config.plugin, config.disabled_plugins)), keep=False) as client:
        client.start()
        client.scheduler.start()
        source = JobSource(JOB, "hcl", "job.hcl")
        version, made = client.scheduler.submit(load_job_text(JOB, "hcl", "job.hcl"), source.record("web"))
        assert (version.number, made) == (0, True)
        (first,) = client.scheduler.live("web")
        (deployment,) = client.deployments.of_job("web")
        try:
            replacement = client.place_replacement(first, ())
            client.run([replacement])
            assert (replacement.job_id, replacement.group.name, replacement.alloc.index) == \
                (first.job_id, "g", first.alloc.index)
            assert replacement.alloc.id != first.alloc.id
            assert deployment.healthy == {replacement.alloc.id: None}  # in its place, its health not known
            (stored,) = client.store.deployments()
            assert Deployment.of_record(stored).healthy == {replacement.alloc.id: None}  # written with it
            first.stop()
            client.deployments.set_health(deployment.id, [replacement.alloc.id], [])
            wait_for(lambda: deployment.status == "successful", 30.0, "the deployment successful")
            latest = client.versions.latest("web")
            assert latest is not None and latest.stable
        finally:
            client.stop_all()
            assert client.wait(client.allocs, 30)


ROLLING = """
job "web" {
  update {
    max_parallel     = 1
    health_check     = "task_states"
    min_healthy_time = "500ms"
  }
  group "g" {
    count = 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "sleep"
        args    = ["300"]
      }
      env {
        VERSION = "%s"
      }
      kill_timeout = "1s"
    }
  }
}
"""


def test_a_rolling_update_moves_on_when_its_allocations_start_turn_healthy_and_die_not_on_a_timer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No tick for an hour: only what happens (a task started, min_healthy_time up, an old allocation
    # dead) moves the deployments on.
    monkeypatch.setattr(deployments, "TICK", 3600.0)
    config = make_config(tmp_path / "data", {"raw_exec": {"enabled": True}})
    with Client(config, Hooks(load_plugins(config.plugin, config.disabled_plugins)), keep=False) as client:
        client.start()
        client.scheduler.start()
        try:
            def deployed(number: int) -> Version:
                text = ROLLING % number
                version, _ = client.scheduler.submit(load_job_text(text, "hcl", "job.hcl"),
                                                     JobSource(text, "hcl", "job.hcl").record("web"))
                (deployment,) = [d for d in client.deployments.of_job("web") if d.version == version.number]
                wait_for(lambda: deployment.status == "successful", 30.0,
                         lambda: f"version {number} deployed, not {deployment.status}")
                return version

            deployed(0)
            version = deployed(1)  # every allocation replaced, one at a time
            live = client.scheduler.live("web")
            assert sorted(a.alloc.index for a in live) == [0, 1]
            assert {a.job_id for a in live} == {version.job_id}
        finally:
            client.stop_all()
            assert client.wait(client.allocs, 30)
