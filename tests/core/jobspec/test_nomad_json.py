"""Nomad's JSON job format (``{"Job": {...}}``), told apart from the canonical JSON by content."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from herder.jobspec import load_job, load_job_text
from herder.jobspec.formats import parse_text
from herder.jobspec.hcl_tree import as_text
from herder.jobspec.nomad_json import from_nomad, is_nomad_json, to_nomad
from herder.jobspec.stanzas import drop_unimplemented
from herder.model import Job
from herder.sdk.durations import parse_duration
from tests.core.jobspec.helpers import problems

VALID = Path(__file__).parent / "valid"
CORPUS = Path(__file__).parent / "corpus"  # `nomad job init`'s files are there


@pytest.mark.parametrize("path", [VALID / "web.hcl", VALID / "lifecycle.nomad", CORPUS / "init-long.nomad.hcl",
                                  CORPUS / "batch-periodic.nomad.hcl", CORPUS / "parameterized-dispatch.nomad.hcl"],
                         ids=lambda path: path.name)
def test_hcl_to_canonical_to_nomad_json_and_back_is_the_same_job(path: Path) -> None:
    canonical = as_text(parse_text(path.read_text(), "hcl", path.name)[0])
    nomad = to_nomad(json.loads(json.dumps(canonical)))
    assert set(nomad) == {"Job"} and "TaskGroups" in nomad["Job"]
    back = from_nomad(json.loads(json.dumps(nomad)))
    drop_unimplemented(back)
    drop_unimplemented(canonical)
    assert _same(back, canonical)
    assert _ports_sorted(load_job_text(json.dumps(nomad), "json", "job.json")) == _ports_sorted(load_job(path))


def _ports_sorted(job: Job) -> Job:
    """Nomad's JSON lists a network's static ports before its dynamic ones: their order is not kept."""
    for group in job.groups:
        group.ports = tuple(sorted(group.ports, key=lambda port: port.label))
        for task in group.tasks:
            ports = tuple(sorted(task.resources.ports, key=lambda port: port.label))
            task.resources = dataclasses.replace(task.resources, ports=ports)
    return job


_DURATIONS = {"kill_timeout", "shutdown_delay", "interval", "delay", "timeout", "grace", "min_healthy_time",
              "healthy_deadline", "progress_deadline", "stagger"}


def _same(left: object, right: object, key: str = "") -> bool:
    """Equal documents, durations compared by value (Nomad's JSON gives them back in seconds)."""
    if key in _DURATIONS:
        return isinstance(left, (str, int, float)) and isinstance(right, (str, int, float)) \
            and parse_duration(left) == parse_duration(right)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k], k) for k in left)
    if key == "ports" and isinstance(left, list) and isinstance(right, list):  # network ports, or docker's
        left, right = (sorted(ports, key=lambda port: json.dumps(port, sort_keys=True)) for ports in (left, right))
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b, key) for a, b in zip(left, right, strict=True))
    return left == right


def test_the_api_example_loads_with_nomads_defaults_for_nulls() -> None:
    job = load_job(VALID / "nomad-api.json")
    group = job.groups[0]
    setup, main = group.tasks
    assert (job.name, job.type, group.count) == ("api-example", "batch", 2)
    assert setup.lifecycle is not None and setup.lifecycle.hook == "prestart"
    assert main.lifecycle is None
    assert setup.kill_timeout == 5.0 and main.kill_timeout == 10.0
    assert [port.label for port in group.ports] == ["http"] and group.ports[0].static is None
    assert (main.resources.memory, main.resources.memory_max) == (128, 256)
    assert main.services[0].checks[0].interval == 10.0
    assert (group.restart.attempts, group.restart.delay) == (1, 5.0)
    assert "ephemeral_disk" in job.warnings[0]


def test_detection_is_by_content() -> None:
    assert is_nomad_json({"Job": {"ID": "x"}})
    assert not is_nomad_json({"job": {"name": "x", "groups": []}})
    assert not is_nomad_json([{"Job": {}}])


def test_problems_name_canonical_paths() -> None:
    text = json.dumps({"Job": {"ID": "x", "TaskGroups": [{"Name": "g", "Count": -1,
                                                          "Tasks": [{"Name": "t", "Driver": "raw_exec"}]}]}})
    errors = problems(text, "json")
    assert errors == ["job.groups[0].count: -1 is below 0"]


def test_static_ports_and_group_services() -> None:
    text = json.dumps({"Job": {"ID": "x", "TaskGroups": [{
        "Name": "g",
        "Networks": [{"Mode": "bridge", "ReservedPorts": [{"Label": "db", "Value": 5432, "To": 5432}]}],
        "Services": [{"Name": "db", "PortLabel": "db"}],
        "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}],
    }]}})
    job = load_job_text(text, "json", "job.json")
    assert job.groups[0].ports[0].static == 5432 and job.groups[0].ports[0].to == 5432
    [service] = job.groups[0].services
    assert (service.name, service.port) == ("db", "db")
    assert any("network mode bridge runs as host networking" in warning for warning in job.warnings)
