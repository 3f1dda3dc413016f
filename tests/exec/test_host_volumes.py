"""Host volumes in exec tasks: the data outlives the jobs that wrote it, and read_only holds (real runc)."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from herder.client.config import ClientConfig, Config, HostVolumeConfig
from tests.support.running import make_config, run_job

from .helpers import job, sh


def with_volume(document: dict[str, Any], *, read_only: bool = False) -> str:
    """``document`` with the host volume ``shared`` as the group's volume ``data``, mounted at ``/srv/data``."""
    group = document["job"]["groups"][0]
    group["volumes"] = [{"name": "data", "type": "host", "source": "shared"}]
    group["tasks"][0]["volume_mounts"] = [{"volume": "data", "destination": "/srv/data", "read_only": read_only}]
    return json.dumps(document)


def with_host_volume(data_dir: Path, volume: Path) -> Config:
    """A configuration declaring ``volume`` as the host volume ``shared``."""
    return dataclasses.replace(make_config(data_dir, plugin={"exec": {}}),
                               client=ClientConfig(host_volumes={"shared": HostVolumeConfig(volume)}))


def test_a_host_volumes_data_outlives_two_jobs(exec_driver: str, data_dir: Path, tmp_path: Path) -> None:
    volume = tmp_path / "shared"
    volume.mkdir()
    os.chmod(volume, 0o777)  # the operator lets the tasks' user (nobody) write there
    config = with_host_volume(data_dir, volume)
    first = run_job(with_volume(job(sh('echo "$NOMAD_JOB_NAME" > /srv/data/written'), name="writer")),
                    data_dir, fmt="json", config=config)
    assert first.status == "complete", [(r.event.type, r.event.message) for r in first.events]
    second = run_job(with_volume(job(sh("cat /srv/data/written >> /srv/data/seen"), name="reader")),
                     data_dir, fmt="json", config=config)
    assert second.status == "complete", [(r.event.type, r.event.message) for r in second.events]
    assert (volume / "seen").read_text() == "writer\n"
    assert (volume / "written").stat().st_uid != 0, "written by the task's user, not by herder"


def test_a_read_only_mount_refuses_writes(exec_driver: str, data_dir: Path, tmp_path: Path) -> None:
    volume = tmp_path / "shared"
    volume.mkdir()
    os.chmod(volume, 0o777)  # only the mount may refuse the write
    (volume / "given").write_text("from the operator\n")
    config = with_host_volume(data_dir, volume)
    script = 'if echo x > /srv/data/planted; then exit 3; fi; grep -q "from the operator" /srv/data/given'
    run = run_job(with_volume(job(sh(script)), read_only=True), data_dir, fmt="json", config=config)
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]
    assert not (volume / "planted").exists()
