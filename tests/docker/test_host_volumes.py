"""Host volumes in docker tasks: the data outlives the jobs that wrote it, and read_only holds (real Docker)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from herder.client.config import ClientConfig, HostVolumeConfig

from .helpers import DockerJobs, docker_job, events_of, job_name, sh


def with_volume(job: dict[str, Any], *, read_only: bool = False) -> dict[str, Any]:
    """``job`` with the host volume ``shared`` as the group's volume ``data``, mounted at ``/data``."""
    group = job["job"]["groups"][0]
    group["volumes"] = [{"name": "data", "type": "host", "source": "shared", "read_only": read_only}]
    group["tasks"][0]["volume_mounts"] = [{"volume": "data", "destination": "/data"}]
    return job


def test_a_host_volumes_data_outlives_two_jobs(jobs: DockerJobs, tmp_path: Path) -> None:
    volume = tmp_path / "volumes" / "shared"
    client = ClientConfig(host_volumes={"shared": HostVolumeConfig(volume, create=True)})
    writer = job_name("writer")
    first = jobs.run(with_volume(docker_job(writer, sh('echo "$NOMAD_JOB_NAME" > /data/written'), type="batch")),
                     client=client)
    assert first.status == "complete", [(r.event.type, r.event.message) for r in first.events]
    assert volume.stat().st_mode & 0o777 == 0o700, "herder made the missing volume 0700"
    second = jobs.run(with_volume(docker_job(job_name("reader"), sh("cat /data/written >> /data/seen"),
                                             type="batch")), client=client)
    assert second.status == "complete", [(r.event.type, r.event.message) for r in second.events]
    assert (volume / "seen").read_text() == f"{writer}\n"
    assert (volume / "written").read_text() == f"{writer}\n", "the first job's file is gone"


def test_a_read_only_volume_refuses_writes(jobs: DockerJobs, tmp_path: Path) -> None:
    volume = tmp_path / "shared"
    volume.mkdir()
    (volume / "given").write_text("from the operator\n")
    client = ClientConfig(host_volumes={"shared": HostVolumeConfig(volume, read_only=True)})
    script = 'if echo x > /data/planted; then exit 3; fi; grep -q "from the operator" /data/given'
    run = jobs.run(with_volume(docker_job(job_name("ro"), sh(script), type="batch"), read_only=True), client=client)
    assert run.status == "complete", [(e.type, e.message) for e in events_of(run, "Terminated")]
    assert not (volume / "planted").exists()


def test_nomads_mounts_list_binds_only_where_volumes_are_enabled(jobs: DockerJobs) -> None:
    """``mounts = [{ ... }]``, Nomad's older spelling of ``mount``, behind the same gate as ``volumes``."""
    mounts = [{"type": "bind", "source": "local", "target": "/opt/app", "readonly": True}]
    config = sh("if echo x > /opt/app/refused; then exit 3; fi; test -d /opt/app",
                mounts=mounts)
    refused = jobs.run(docker_job(job_name("mounts"), config, type="batch"))
    [failure] = events_of(refused, "Driver Failure")
    assert "volumes_enabled" in failure.message and "mounts" in failure.message
    allowed = jobs.run(docker_job(job_name("mounts"), config, type="batch"),
                       plugin={"docker": {"volumes_enabled": True}})
    assert allowed.status == "complete", [(e.type, e.message) for e in events_of(allowed, "Terminated")]
    local = allowed.runner.allocs[0].tasks[0].ctx.task_dir.local_dir
    assert not (local / "refused").exists()
