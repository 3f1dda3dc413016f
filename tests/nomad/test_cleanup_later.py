"""A cleanup step that asks to finish later (``CleanupLater``) is honoured under Nomad."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.docker.helpers import Docker, image_exists, remove_image, save_image, sh
from tests.docker.test_images import COPY_PLUGIN
from tests.nomad.helpers import NomadCluster, wait_for
from tests.nomad.test_nomad import RECORDING_PLUGINS, job_file, raw_exec_job

DELAY = 4.0
"""The recorder's CleanupLater delay: long enough for the plugin to be killed and started again first."""


def stored_steps(state_db: Path) -> list[tuple[str, float]]:
    """The cleanup steps left for later in the plugin's state database: (key, due)."""
    if not state_db.exists():
        return []
    with sqlite3.connect(f"file:{state_db}?mode=ro", uri=True) as db:
        return list(db.execute("SELECT key, due FROM deferred WHERE kind = 'cleanup'"))


def test_a_step_left_for_later_is_made_after_its_delay_by_the_next_plugin_process(
        cluster: NomadCluster, tmp_path: Path, install: Callable[..., Path]) -> None:
    install("herder-testplugins", "1.2.3", {"herder.plugins": {"recorder": "herder_testplugins:Recorder"}},
            {"herder_testplugins.py": RECORDING_PLUGINS})
    log = tmp_path / "hooks.jsonl"
    cluster.add("dev", mode="dev", plugin_tables=f'recorder = {{ log = "{log}", cleanup_later = {DELAY} }}')
    cluster.wait_ready()
    cluster.run_job(job_file(tmp_path, "later", raw_exec_job("later", "echo ran")))
    alloc = cluster.wait_alloc("later", "complete")[0]

    def cleanups() -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        return [line for line in lines if line["hook"] == "herder_task_cleanup" and line.get("alloc") == alloc["ID"]]

    [first] = wait_for(cleanups, 60, "the task's cleanup, which asks to finish later")
    state_db = cluster.root / "herder" / "dev" / "state.db"
    [(key, due)] = wait_for(lambda: stored_steps(state_db), 30, "the step left for later in the plugin's state.db")
    assert key.startswith(f"{alloc['ID']}/t/") and due >= first["time"] + DELAY, (key, due, first)
    # The plugin process dies before the step is due; Nomad starts another, which knows nothing of the task.
    os.kill(first["pid"], signal.SIGKILL)
    wait_for(lambda: len(cleanups()) >= 2, 120, "the step to be made again by a new plugin process")
    [_, second] = cleanups()
    assert second["pid"] != first["pid"]
    assert second["time"] >= first["time"] + DELAY, (first, second)
    wait_for(lambda: not stored_steps(state_db), 30, "the step done to leave the state database")


@pytest.mark.slow
def test_docker_removes_the_image_it_loaded_after_cleanup_image_delay(
        cluster: NomadCluster, tmp_path: Path, install: Callable[..., Path], docker_driver: str,
        docker_client: Docker, unique_image: Callable[[], str]) -> None:
    # The driver removes only images herder fetched: this one is loaded from a tarball that a
    # lifecycle plugin puts in the task's dir. Its removal waits for cleanup_image_delay, which
    # the driver's cleanup asks for by raising CleanupLater once the task is destroyed. The plugin
    # process is killed before the delay is over: the next one removes the image.
    install("herder-test-copyimage", "0.1", {"herder.plugins": {"copyimage": "herder_test_copyimage:CopyImage"}},
            {"herder_test_copyimage.py": COPY_PLUGIN})
    tag = unique_image()
    tarball = save_image(docker_client, tag, tmp_path / "image.tar")
    remove_image(docker_client, tag)
    assert not image_exists(docker_client, tag)
    agent = cluster.add("dev", mode="dev", plugin_tables=f"""
      docker    = {{ cleanup_image = true, cleanup_image_delay = "{DELAY:g}s" }}
      copyimage = {{ tarball = "{tarball}" }}""")
    cluster.wait_ready()
    config = sh("echo ran", image=tag, load="local/image.tar")
    job = tmp_path / "loaded.nomad"
    job.write_text(f"""
job "loaded" {{
  datacenters = ["dc1"]
  type = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode = "fail"
    }}
    task "t" {{
      driver = "herder"
      config {{
        driver = "docker"
        config = {json.dumps(config)}
      }}
    }}
  }}
}}
""")
    cluster.run_job(job)
    alloc = cluster.wait_alloc("loaded", ("complete", "failed"))[0]
    assert alloc["ClientStatus"] == "complete", cluster.events(alloc["ID"], "t")
    assert cluster.logs(alloc["ID"], "t") == "ran\n"  # the task ran from the image herder loaded
    state_db = cluster.root / "herder" / "dev" / "state.db"
    wait_for(lambda: stored_steps(state_db), 30, "the image's removal left for later in the plugin's state.db")
    plugins = agent.plugin_processes()
    assert plugins, "no herder plugin process found"
    for pid in plugins:
        os.kill(pid, signal.SIGKILL)
    assert image_exists(docker_client, tag), "the image was removed before cleanup_image_delay"
    wait_for(lambda: not image_exists(docker_client, tag), 60, f"herder's docker driver to remove {tag}")
    wait_for(lambda: not stored_steps(state_db), 30, "the removal done to leave the state database")
