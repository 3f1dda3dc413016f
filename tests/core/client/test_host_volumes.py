"""Host volumes on the node: the configuration, placement's check, their preparation and what a task mounts."""

from __future__ import annotations

import re
import subprocess
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.client.config import HostVolumeConfig, load_config
from herder.client.volumes import missing_host_volumes, prepare, task_mounts
from herder.context import HostMount
from herder.errors import ConfigError, PlacementError
from tests.core.jobspec.helpers import load

Herder = Callable[..., subprocess.CompletedProcess[str]]

JOB = """
job "db" {
  type = "batch"
  group "g" {
    volume "data" {
      type      = "host"
      source    = "pgdata"
      read_only = %(group_read_only)s
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"""


def job(group_read_only: bool = False, mount: str = "") -> str:
    text = JOB % {"group_read_only": str(group_read_only).lower()}
    return text.replace('driver = "raw_exec"', f'driver = "raw_exec"\n{mount}') if mount else text


def test_the_configuration_declares_host_volumes(tmp_path: Path) -> None:
    path = tmp_path / "herder.toml"
    path.write_text(textwrap.dedent("""
        [client.host_volume.pgdata]
        path = "/srv/pg"
        [client.host_volume.certs]
        path = "/etc/ssl/certs"
        read_only = true
        create = false
    """))
    volumes = load_config(path, data_dir=tmp_path).client.host_volumes
    assert volumes == {"pgdata": HostVolumeConfig(Path("/srv/pg")),
                       "certs": HostVolumeConfig(Path("/etc/ssl/certs"), read_only=True)}


@pytest.mark.parametrize(("table", "message"), [
    ('path = "srv/pg"', "[client.host_volume.pg] path must be an absolute path, not 'srv/pg'"),
    ('path = "/srv/pg"\nmode = "0755"', "unknown key(s) at [client.host_volume.pg]: mode"),
    ('path = "/srv/pg"\ncreate = "yes"', "[client.host_volume.pg] create must be true or false"),
])
def test_a_bad_host_volume_is_named(tmp_path: Path, table: str, message: str) -> None:
    path = tmp_path / "herder.toml"
    path.write_text(f"[client.host_volume.pg]\n{table}\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, data_dir=tmp_path)


def test_placement_names_a_volume_the_node_lacks(tmp_path: Path) -> None:
    [problem] = missing_host_volumes(load(job()), {"other": HostVolumeConfig(tmp_path)})
    assert problem == ("missing compatible host volumes: group 'g' volume 'data': host volume 'pgdata' is not "
                       "on this node (its host volumes: other)")


def test_a_read_only_host_volume_needs_a_read_only_request(tmp_path: Path) -> None:
    volumes = {"pgdata": HostVolumeConfig(tmp_path, read_only=True)}
    [problem] = missing_host_volumes(load(job()), volumes)
    assert "host volume 'pgdata' is read-only on this node" in problem
    assert missing_host_volumes(load(job(group_read_only=True)), volumes) == []


def test_a_missing_path_fails_placement_unless_herder_may_create_it(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "yet"
    [problem] = missing_host_volumes(load(job()), {"pgdata": HostVolumeConfig(missing)})
    assert f"has no {missing} (set create = true" in problem
    with pytest.raises(PlacementError, match="has no"):
        prepare(HostVolumeConfig(missing), "pgdata")
    assert missing_host_volumes(load(job()), {"pgdata": HostVolumeConfig(missing, create=True)}) == []
    assert prepare(HostVolumeConfig(missing, create=True), "pgdata") == missing
    assert missing.is_dir() and missing.stat().st_mode & 0o777 == 0o700


def test_a_link_in_the_operators_path_is_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    assert prepare(HostVolumeConfig(tmp_path / "link"), "pgdata") == tmp_path / "real"


@pytest.mark.parametrize(("host", "group", "mount", "read_only"), [
    (False, False, False, False), (True, True, False, True), (False, True, False, True), (False, False, True, True),
])
def test_a_mount_is_read_only_if_any_of_the_three_says_so(tmp_path: Path, host: bool, group: bool, mount: bool,
                                                          read_only: bool) -> None:
    block = f'volume_mount {{\n volume = "data"\n destination = "/data"\n read_only = {str(mount).lower()}\n }}'
    loaded = load(job(group_read_only=group, mount=block))
    [hosted] = task_mounts(loaded.groups[0], loaded.groups[0].tasks[0], 0,
                           {"pgdata": HostVolumeConfig(tmp_path, read_only=host)})
    assert hosted == HostMount(source=tmp_path, destination="/data", read_only=read_only)


def test_herder_run_fails_placement_naming_the_missing_volume(herder: Herder, config_file: Path,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "db.hcl"
    path.write_text(job())
    result = herder("run", "--config", str(config_file), str(path))
    assert result.returncode == 1
    assert "missing compatible host volumes: group 'g' volume 'data': host volume 'pgdata' is not on this node" \
        in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path / "data").glob("allocs/*")), "an allocation was placed"


def test_a_driver_that_cannot_mount_is_refused_naming_it(herder: Herder, config_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "db.hcl"
    path.write_text(job(mount='volume_mount {\n volume = "data"\n destination = "/data"\n }'))
    result = herder("validate", "--config", str(config_file), str(path))
    assert result.returncode != 0
    assert "job.groups[0].tasks[0].volume_mounts: driver 'raw_exec' cannot mount host volumes" in result.stderr, \
        result.stderr
