"""A cleanup step that asks to finish later (``CleanupLater``) is honoured under Nomad."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.docker.helpers import Docker, image_exists, remove_image, save_image, sh
from tests.docker.test_images import COPY_PLUGIN
from tests.nomad.helpers import NomadCluster, wait_for


@pytest.mark.slow
def test_docker_removes_the_image_it_loaded_after_cleanup_image_delay(
        cluster: NomadCluster, tmp_path: Path, install: Callable[..., Path], docker_driver: str,
        docker_client: Docker, unique_image: Callable[[], str]) -> None:
    # The driver removes only images herder fetched: this one is loaded from a tarball that a
    # lifecycle plugin puts in the task's dir. Its removal waits for cleanup_image_delay, which
    # the driver's cleanup asks for by raising CleanupLater once the task is destroyed.
    install("herder-test-copyimage", "0.1", {"herder.plugins": {"copyimage": "herder_test_copyimage:CopyImage"}},
            {"herder_test_copyimage.py": COPY_PLUGIN})
    tag = unique_image()
    tarball = save_image(docker_client, tag, tmp_path / "image.tar")
    remove_image(docker_client, tag)
    assert not image_exists(docker_client, tag)
    cluster.add("dev", mode="dev", plugin_tables=f"""
      docker    = {{ cleanup_image = true, cleanup_image_delay = "2s" }}
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
    wait_for(lambda: not image_exists(docker_client, tag), 60, f"herder's docker driver to remove {tag}")
