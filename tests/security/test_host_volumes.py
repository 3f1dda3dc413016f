"""A host volume gives a task what the operator declared, no more.

The attack: the operator declares a directory read-only (``[client.host_volume.NAME] read_only =
true``), and something is mounted inside it on the host (a disk, a tmpfs, an NFS share: the
operator's own layout). A bind mount is recursive, so the task sees that mount too; a plain
``ro`` flag only covers the top of the bind, so the task wrote into the inner mount, read-only
volume or not. runc makes the whole tree read-only (``rro``); Docker (before API 1.44) cannot,
so a read-only volume is bound without what is mounted inside it.

And: the operator declares ``/srv/vols`` and ``/srv/vols/pg`` as two volumes. A container of one job,
root in it, mounts the outer one and leaves a link at ``pg`` to ``/``; the next task mounting ``pg``
got the host's root, read-write, as Docker and runc follow the link. A host volume inside another
that tasks may write is refused when the configuration is read.

And: a job author writes a destination with ``${...}`` in it, which the check of destinations let
through unchecked, though nothing interpolates it: ``/x${y}/..`` (the container's root, to runc)
and a relative path reached the drivers. It is checked as written.

And: the operator declares ``/tmp/scratch`` with ``create = true``. Another user of the host leaves a
link there first, to a directory of root's; the kernel (``fs.protected_symlinks``, on in most
distributions) would not let root follow it, but herder resolved the path itself and handed the
driver the result: the job's container, root, wrote where the link led.

And: herder makes a missing volume (``create = true``) at ``/srv/scratch``. A container, root in it,
copies a shell there and makes it setuid (Docker cannot bind with ``nosuid``); the volume was 0755,
so any other user of the host ran it, as root. herder makes it 0700.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herder.client.config import ClientConfig, HostVolumeConfig, load_config
from herder.client.volumes import prepare
from herder.errors import ConfigError, JobError, PlacementError
from herder.jobspec import load_job_text
from tests.docker.conftest import busybox_image, docker_client, docker_driver, jobs  # noqa: F401 (fixtures)
from tests.docker.helpers import DockerJobs, docker_job, events_of, job_name, sh
from tests.exec.helpers import containers_under
from tests.exec.helpers import job as exec_job
from tests.exec.helpers import sh as exec_sh
from tests.support.require import require_driver
from tests.support.running import make_config, run_job

# Exits 3 when the write into the inner mount got through, 0 when it was refused.
WRITE_INSIDE = "if echo x > /data/inner/planted; then exit 3; fi; test -d /data"


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    """A directory anyone may write, with a tmpfs anyone may write mounted at ``inner``: only the
    mounts may refuse the task's write. Unmounted at the end."""
    path = tmp_path / "shared"
    inner = path / "inner"
    inner.mkdir(parents=True)
    os.chmod(path, 0o777)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", str(inner)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", str(inner)], check=True)


def read_only_volume(volume: Path) -> ClientConfig:
    return ClientConfig(host_volumes={"shared": HostVolumeConfig(volume, read_only=True)})


def with_volume(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with the read-only host volume ``shared`` mounted at ``/data``."""
    group = document["job"]["groups"][0]
    group["volumes"] = [{"name": "data", "type": "host", "source": "shared", "read_only": True}]
    group["tasks"][0]["volume_mounts"] = [{"volume": "data", "destination": "/data"}]
    return document


def test_exec_a_read_only_volume_is_read_only_inside_its_mounts(volume: Path, data_dir: Path,
                                                                 tmp_path: Path) -> None:
    require_driver("exec")
    config = dataclasses.replace(make_config(data_dir, plugin={"exec": {}}), client=read_only_volume(volume))
    try:
        run = run_job(json.dumps(with_volume(exec_job(exec_sh(WRITE_INSIDE)))), data_dir, fmt="json", config=config)
    finally:
        assert not containers_under(tmp_path), "containers left behind"
    assert not (volume / "inner" / "planted").exists(), "the task wrote inside a read-only volume"
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]


def test_docker_a_read_only_volume_is_read_only_inside_its_mounts(jobs: DockerJobs, volume: Path) -> None:  # noqa: F811
    run = jobs.run(with_volume(docker_job(job_name("ro-inner"), sh(WRITE_INSIDE), type="batch")),
                   client=read_only_volume(volume))
    assert not (volume / "inner" / "planted").exists(), "the task wrote inside a read-only volume"
    assert run.status == "complete", [(e.type, e.message) for e in events_of(run, "Terminated")]


def test_a_volume_inside_one_tasks_may_write_is_refused(tmp_path: Path) -> None:
    outer = tmp_path / "vols"
    (outer / "elsewhere").mkdir(parents=True)
    (tmp_path / "pg").symlink_to(outer / "elsewhere")  # the operator's link: inside by its resolved path
    for inner in (outer / "pg", tmp_path / "pg"):
        path = tmp_path / "herder.toml"
        path.write_text(f'[client.host_volume.vols]\npath = "{outer}"\n\n'
                        f'[client.host_volume.pg]\npath = "{inner}"\ncreate = true\n')
        with pytest.raises(ConfigError, match=r"\[client\.host_volume\.pg\] .* inside host volume 'vols'"):
            load_config(path, data_dir=tmp_path / "data")
    with pytest.raises(ConfigError, match="inside host volume 'vols'"):
        ClientConfig(host_volumes={"vols": HostVolumeConfig(outer), "pg": HostVolumeConfig(outer / "pg")})


def test_a_volume_inside_a_read_only_one_or_the_same_path_twice_is_accepted(tmp_path: Path) -> None:
    outer = tmp_path / "vols"
    volumes = {"vols": HostVolumeConfig(outer, read_only=True), "pg": HostVolumeConfig(outer / "pg"),
               "again": HostVolumeConfig(outer / "pg")}
    assert ClientConfig(host_volumes=volumes).host_volumes == volumes


@pytest.mark.parametrize("destination", ["/x${y}/..", "${NOMAD_TASK_DIR}/data"])
def test_a_destination_with_an_interpolation_is_checked_too(destination: str) -> None:
    document = with_volume(exec_job(exec_sh("true")))
    document["job"]["groups"][0]["tasks"][0]["volume_mounts"][0]["destination"] = destination
    with pytest.raises(JobError, match=r"job\.groups\[0\]\.tasks\[0\]\.volume_mounts\[0\]\.destination: "
                                       r".* must be an absolute path other than /"):
        load_job_text(json.dumps(document), "json", "job.json")


def test_a_link_another_user_left_in_a_shared_directory_is_not_followed(tmp_path: Path) -> None:
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp
    target = tmp_path / "roots"
    target.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    planted = shared / "scratch"
    planted.symlink_to(target)
    os.lchown(planted, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(PlacementError, match=f"host volume 'scratch': {planted} is a link of another user"):
        prepare(HostVolumeConfig(planted, create=True), "scratch")
    on_the_way = shared / "vols"  # a missing volume is not made through one either
    on_the_way.symlink_to(target)
    os.lchown(on_the_way, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(PlacementError, match=f"{on_the_way} is a link of another user"):
        prepare(HostVolumeConfig(on_the_way / "pg", create=True), "pg")
    assert not (target / "pg").exists()
    os.lchown(planted, 0, 0)  # the operator's own link is followed
    assert prepare(HostVolumeConfig(planted, create=True), "scratch") == target


def test_a_made_volume_keeps_a_containers_setuid_program_from_other_users(jobs: DockerJobs) -> None:  # noqa: F811
    base = Path(tempfile.mkdtemp(dir="/var/tmp"))  # not under pytest's root-only directory: as /srv
    try:
        os.chmod(base, 0o755)
        volume = base / "scratch"
        client = ClientConfig(host_volumes={"scratch": HostVolumeConfig(volume, create=True)})
        document = docker_job(job_name("setuid"), sh("cp /bin/sh /data/sh && chmod 4755 /data/sh"), type="batch")
        document["job"]["groups"][0]["volumes"] = [{"name": "data", "type": "host", "source": "scratch"}]
        document["job"]["groups"][0]["tasks"][0]["volume_mounts"] = [{"volume": "data", "destination": "/data"}]
        run = jobs.run(document, client=client)
        assert run.status == "complete", [(e.type, e.message) for e in events_of(run, "Terminated")]
        assert (volume / "sh").stat().st_mode & 0o4000, "the container's setuid program is there"
        reached = subprocess.run(["runuser", "-u", "nobody", "--", "test", "-x", str(volume / "sh")], check=False)
        assert reached.returncode != 0, "another user of the host may run the container's setuid-root program"
    finally:
        shutil.rmtree(base)


def test_a_destination_with_a_nul_byte_is_refused_by_its_path() -> None:
    document = with_volume(exec_job(exec_sh("true")))
    document["job"]["groups"][0]["tasks"][0]["volume_mounts"][0]["destination"] = "/data\0/x"
    with pytest.raises(JobError, match=r"job\.groups\[0\]\.tasks\[0\]\.volume_mounts\[0\]\.destination: "
                                       r"'/data\\x00/x' has a NUL byte"):
        load_job_text(json.dumps(document), "json", "job.json")
