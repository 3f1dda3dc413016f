"""Two versions of a job compared as Nomad's ``JobDiff`` (what ``nomad job plan`` prints)."""

from __future__ import annotations

import copy
from typing import Any

from herder.agent.nomad.diff import job_diff

JOB: dict[str, Any] = {
    "ID": "web", "Name": "web", "Type": "service", "Priority": 50, "Datacenters": ["dc1"], "Status": "running",
    "Version": 3, "ModifyIndex": 40,
    "TaskGroups": [{
        "Name": "g", "Count": 1, "RestartPolicy": {"Attempts": 2, "Mode": "fail"},
        "Services": [{"Name": "s", "Tags": ["a"]}],
        "Tasks": [{"Name": "t", "Driver": "raw_exec", "KillTimeout": 5_000_000_000,
                   "Config": {"command": "/bin/sh", "args": ["-c", "sleep 3600"], "opts": {"x": 1}}}],
    }],
}


def field(kind: str, name: str, old: str, new: str) -> dict[str, Any]:
    return {"Type": kind, "Name": name, "Old": old, "New": new, "Annotations": None}


def test_a_new_job_is_added_with_its_fields_and_what_the_server_sets_left_out() -> None:
    diff = job_diff(None, JOB)
    assert diff["Type"] == "Added" and diff["ID"] == "web"
    assert [f["Name"] for f in diff["Fields"]] == ["Name", "Priority", "Type"]  # sorted; no Status, Version, ...
    assert diff["Objects"] == [{"Type": "Added", "Name": "Datacenters", "Fields": [field("Added", "Datacenters", "",
                                                                                         "dc1")], "Objects": None}]
    group = diff["TaskGroups"][0]
    assert group["Type"] == "Added" and group["Name"] == "g" and group["Updates"] is None
    assert group["Tasks"][0]["Type"] == "Added" and group["Tasks"][0]["Name"] == "t"


def test_the_same_job_is_none_down_to_its_tasks() -> None:
    same = copy.deepcopy(JOB) | {"Status": "pending", "Version": 4}  # the server's fields are no difference
    diff = job_diff(JOB, same)
    assert diff["Type"] == "None" and diff["Fields"] is None and diff["Objects"] is None
    assert diff["TaskGroups"][0]["Type"] == "None" and diff["TaskGroups"][0]["Tasks"][0]["Type"] == "None"


def test_a_driver_config_is_flattened_and_given_in_context() -> None:
    new = copy.deepcopy(JOB)
    new["TaskGroups"][0]["Tasks"][0]["Config"]["args"][1] = "sleep 3601"
    diff = job_diff(JOB, new)
    assert diff["Type"] == "Edited" and diff["TaskGroups"][0]["Type"] == "Edited"
    task = diff["TaskGroups"][0]["Tasks"][0]
    assert task["Type"] == "Edited" and task["Fields"] is None
    assert task["Objects"] == [{"Type": "Edited", "Name": "Config", "Objects": None, "Fields": [
        field("None", "args[0]", "-c", "-c"), field("Edited", "args[1]", "sleep 3600", "sleep 3601"),
        field("None", "command", "/bin/sh", "/bin/sh"), field("None", "opts.x", "1", "1")]}]


def test_fields_of_a_group_and_of_its_blocks() -> None:
    new = copy.deepcopy(JOB)
    new["TaskGroups"][0]["Count"] = 3
    new["TaskGroups"][0]["RestartPolicy"]["Attempts"] = 5
    new["TaskGroups"][0]["Services"][0]["Tags"] = ["a", "b"]
    group = job_diff(JOB, new)["TaskGroups"][0]
    assert group["Fields"] == [field("Edited", "Count", "1", "3")]
    restart, service = group["Objects"]
    assert restart == {"Type": "Edited", "Name": "RestartPolicy", "Objects": None, "Fields": [
        field("Edited", "Attempts", "2", "5"), field("None", "Mode", "fail", "fail")]}
    assert service["Type"] == "Edited" and service["Name"] == "Service"
    assert service["Objects"] == [{"Type": "Edited", "Name": "Tags", "Fields": [field("Added", "Tags", "", "b")],
                                   "Objects": None}]


def test_groups_and_tasks_are_matched_by_name() -> None:
    new = copy.deepcopy(JOB)
    new["TaskGroups"][0]["Name"] = "h"
    new["TaskGroups"][0]["Tasks"].append({"Name": "u", "Driver": "raw_exec"})
    diff = job_diff(JOB, new)
    assert [(g["Name"], g["Type"]) for g in diff["TaskGroups"]] == [("g", "Deleted"), ("h", "Added")]
    assert [t["Name"] for t in diff["TaskGroups"][1]["Tasks"]] == ["t", "u"]


def test_a_job_stopped_is_deleted() -> None:
    diff = job_diff(JOB, None)
    assert diff["Type"] == "Deleted" and diff["TaskGroups"][0]["Type"] == "Deleted"
    assert all(f["Type"] == "Deleted" for f in diff["Fields"])
