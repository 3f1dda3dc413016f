"""A group's ``volume`` and a task's ``volume_mount`` blocks: read into the model, checked by path."""

from __future__ import annotations

import json

import pytest

from herder.jobspec.load import evaluate_job_text
from herder.jobspec.nomad_json import to_nomad
from herder.jobspec.update_kind import UpdateKind, group_update
from herder.model import VolumeMount, VolumeRequest

from .helpers import load, problems, task_hcl

VOLUME = """
    volume "data" {
      type      = "host"
      source    = "pgdata"
      read_only = false
    }
"""
MOUNT = """
      volume_mount {
        volume           = "data"
        destination      = "/var/lib/db"
        propagation_mode = "host-to-task"
      }
"""


def test_host_volumes_and_mounts_are_part_of_the_job_with_no_warning() -> None:
    job = load(task_hcl(MOUNT, VOLUME))
    group = job.groups[0]
    assert group.volumes == (VolumeRequest(name="data", source="pgdata"),)
    assert group.tasks[0].volume_mounts == (VolumeMount("data", "/var/lib/db", propagation_mode="host-to-task"),)
    assert job.warnings == []


def test_nomad_json_volumes_by_name_round_trip() -> None:
    job, document = evaluate_job_text(task_hcl(MOUNT, VOLUME), "hcl", "job.hcl")
    nomad = to_nomad(document)
    group = nomad["Job"]["TaskGroups"][0]
    assert group["Volumes"] == {"data": {"Name": "data", "Type": "host", "Source": "pgdata", "ReadOnly": False}}
    assert group["Tasks"][0]["VolumeMounts"][0]["Destination"] == "/var/lib/db"
    again = load(json.dumps(nomad), "json")
    assert again.groups[0].volumes == job.groups[0].volumes
    assert again.groups[0].tasks[0].volume_mounts == job.groups[0].tasks[0].volume_mounts


def test_a_reader_only_access_mode_and_per_alloc_as_nomad() -> None:
    job = load(task_hcl("", """
    volume "shard" {
      type        = "host"
      source      = "shard"
      access_mode = "single-node-reader-only"
      per_alloc   = true
    }
"""))
    [volume] = job.groups[0].volumes
    assert volume.read_only
    assert [volume.source_for(index) for index in (0, 1)] == ["shard[0]", "shard[1]"]


def test_a_csi_volume_is_refused_naming_it() -> None:
    [error] = problems(task_hcl("", """
    volume "ebs" {
      type            = "csi"
      source          = "database"
      attachment_mode = "file-system"
      access_mode     = "single-node-writer"
    }
"""))
    assert "job.groups[0].volumes[0].type" in error
    assert "volume 'ebs' is a csi volume: herder has no CSI" in error


def test_a_mount_of_no_group_volume_is_refused_by_path() -> None:
    [error] = problems(task_hcl(MOUNT.replace('"data"', '"nope"'), VOLUME))
    assert "job.groups[0].tasks[0].volume_mounts[0].volume: names no volume of the group (data)" in error


def test_a_destination_must_be_absolute() -> None:
    [error] = problems(task_hcl(MOUNT.replace('"/var/lib/db"', '"data"'), VOLUME))
    assert "volume_mounts[0].destination: 'data' must be an absolute path" in error


def test_a_block_device_host_volume_is_refused() -> None:
    [error] = problems(task_hcl("", VOLUME.replace("read_only = false", 'attachment_mode = "block-device"')))
    assert "volumes[0].attachment_mode: volume 'data': a host volume is mounted as a file system" in error


def test_selinux_label_is_warned_about_as_not_implemented() -> None:
    job = load(task_hcl(MOUNT.replace("propagation_mode", 'selinux_label = "z"\n        propagation_mode'), VOLUME))
    assert job.warnings == ["ignoring stanzas herder does not implement: volume_mount.selinux_label"]


def test_nomads_json_with_its_unset_fields_is_read_as_the_hcl() -> None:
    """As ``nomad job run`` sends it: every field, unset ones at their zero value."""
    group = {"Name": "app", "Volumes": {"data": {
        "Name": "data", "Type": "host", "Source": "pgdata", "ReadOnly": False, "AccessMode": "", "AttachmentMode": "",
        "MountOptions": None, "PerAlloc": False, "Sticky": False}},
        "Tasks": [{"Name": "server", "Driver": "raw_exec", "Config": {"command": "/bin/true"}, "VolumeMounts": [
            {"Volume": "data", "Destination": "/var/lib/db", "ReadOnly": False, "PropagationMode": "host-to-task",
             "SELinuxLabel": ""}]}]}
    job = load(json.dumps({"Job": {"ID": "web", "TaskGroups": [group]}}), "json")
    assert job.groups[0].volumes == load(task_hcl(MOUNT, VOLUME)).groups[0].volumes
    assert job.groups[0].tasks[0].volume_mounts == load(task_hcl(MOUNT, VOLUME)).groups[0].tasks[0].volume_mounts
    assert job.warnings == []


@pytest.mark.parametrize("changed", [VOLUME.replace("pgdata", "other"), VOLUME.replace("false", "true")])
def test_a_changed_volume_replaces_the_allocations(changed: str) -> None:
    """As Nomad's tasksUpdated: the tasks restart for another volume or mount."""
    assert group_update(load(task_hcl(MOUNT, VOLUME)), load(task_hcl(MOUNT, changed)), "app") == \
        UpdateKind.DESTRUCTIVE
    other_mount = MOUNT.replace("/var/lib/db", "/data")
    assert group_update(load(task_hcl(MOUNT, VOLUME)), load(task_hcl(other_mount, VOLUME)), "app") == \
        UpdateKind.DESTRUCTIVE
