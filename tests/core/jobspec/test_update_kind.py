"""What a new version does to a group's allocations, as Nomad's scheduler decides it (``tasksUpdated``)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from herder.jobspec import load_job_text
from herder.jobspec.update_kind import UpdateKind, group_update
from herder.model import Job

JOB: dict[str, Any] = {
    "name": "web", "meta": {"owner": "a"},
    "groups": [{
        "name": "g", "count": 2, "network": {"ports": [{"label": "http"}]}, "restart": {"attempts": 1, "mode": "fail"},
        "services": [{"name": "s", "port": "http", "tags": ["a"],
                      "checks": [{"type": "tcp", "interval": "10s", "timeout": "2s"}]}],
        "tasks": [{"name": "t", "driver": "raw_exec", "user": "nobody", "config": {"command": "/bin/sleep"},
                   "env": {"A": "b"}, "meta": {"b": "2"}, "resources": {"cpu": 100, "memory": 64},
                   "templates": [{"data": "x", "destination": "local/x"}], "kill_timeout": "5s",
                   "services": [{"name": "inner", "tags": ["x"]}]}],
    }, {"name": "other", "count": 1,
        "tasks": [{"name": "o", "driver": "raw_exec", "config": {"command": "/bin/true"}}]}],
}


def load(document: dict[str, Any]) -> Job:
    return load_job_text(json.dumps({"job": document}), "json", "<test>", {})


BEFORE = load(JOB)


def changed(path: str, value: Any) -> Job:
    """JOB with the value at ``path`` (keys and list indexes, dotted) set to ``value``."""
    job = copy.deepcopy(JOB)
    *parents, last = path.split(".")
    target: Any = job
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[last] = value
    return load(job)


def test_the_same_group_is_no_update() -> None:
    assert group_update(BEFORE, load(copy.deepcopy(JOB)), "g") is UpdateKind.NONE


def test_count_alone_scales() -> None:
    assert group_update(BEFORE, changed("groups.0.count", 5), "g") is UpdateKind.COUNT


@pytest.mark.parametrize(("path", "value"), [
    ("groups.0.services.0.tags", ["b"]),
    ("groups.0.services.0.checks.0.interval", "5s"),
    ("groups.0.restart", {"attempts": 3, "mode": "fail"}),
    ("groups.0.tasks.0.kill_timeout", "10s"),
    ("groups.0.tasks.0.services.0.tags", ["y"]),
])
def test_what_no_task_restarts_for_is_in_place(path: str, value: Any) -> None:
    assert group_update(BEFORE, changed(path, value), "g") is UpdateKind.IN_PLACE


@pytest.mark.parametrize(("path", "value"), [
    ("groups.0.tasks.0.driver", "exec"),
    ("groups.0.tasks.0.user", "root"),
    ("groups.0.tasks.0.config", {"command": "/bin/true"}),
    ("groups.0.tasks.0.env", {"A": "c"}),
    ("groups.0.tasks.0.meta", {"b": "3"}),
    ("groups.0.meta", {"c": "4"}),
    ("meta", {"owner": "b"}),
    ("groups.0.tasks.0.resources", {"cpu": 200, "memory": 64}),
    ("groups.0.tasks.0.templates", []),
    ("groups.0.tasks.0.artifacts", [{"source": "https://example.com/x"}]),
    ("groups.0.network", {"ports": [{"label": "http", "static": 8080}]}),
    ("groups.0.tasks.0.name", "renamed"),
])
def test_what_a_task_restarts_for_is_destructive(path: str, value: Any) -> None:
    assert group_update(BEFORE, changed(path, value), "g") is UpdateKind.DESTRUCTIVE


def test_a_change_of_another_group_is_none_of_this_ones() -> None:
    assert group_update(BEFORE, changed("groups.1.tasks.0.config", {"command": "/bin/false"}), "g") is UpdateKind.NONE
    assert group_update(BEFORE, changed("groups.1.tasks.0.config", {"command": "/bin/false"}),
                        "other") is UpdateKind.DESTRUCTIVE


def test_count_with_an_in_place_change_is_in_place() -> None:
    document = copy.deepcopy(JOB)
    document["groups"][0]["count"] = 3
    document["groups"][0]["restart"] = {"attempts": 4, "mode": "fail"}
    assert group_update(BEFORE, load(document), "g") is UpdateKind.IN_PLACE


def test_a_group_in_one_version_only_is_destructive() -> None:
    document = copy.deepcopy(JOB)
    document["groups"][1]["name"] = "third"
    assert group_update(BEFORE, load(document), "other") is UpdateKind.DESTRUCTIVE
    assert group_update(BEFORE, load(document), "third") is UpdateKind.DESTRUCTIVE
