"""Nomad's JSON job format (``{"Job": {...}}``), told apart from the canonical JSON by content."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from herder.jobspec import load_job, load_job_text
from herder.jobspec.formats import parse_text
from herder.jobspec.hcl_tree import as_text
from herder.jobspec.nomad_json import from_nomad, is_nomad_json, to_nomad
from herder.jobspec.nomad_structs import JOB, SERVER, VALUE, ListOf, MapOf, Struct, normalized
from herder.jobspec.stanzas import drop_unimplemented
from herder.model import Job
from herder.sdk.durations import parse_duration
from tests.core.jobspec.helpers import problems

VALID = Path(__file__).parent / "valid"
CORPUS = Path(__file__).parent / "corpus"  # `nomad job init`'s files are there


@pytest.mark.parametrize("path", [VALID / "web.hcl", VALID / "lifecycle.nomad", CORPUS / "init-long.nomad.hcl",
                                  CORPUS / "batch-periodic.nomad.hcl", CORPUS / "parameterized-dispatch.nomad.hcl",
                                  VALID.parents[3] / "examples" / "countdash.nomad"],
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
    """Nomad's JSON lists a network's static ports before its dynamic ones, and fields in its structs'
    order: the order of ports, and of the names of stanzas a warning gives, is not kept."""
    job.warnings = [f"{prefix}: {', '.join(sorted(names.split(', ')))}"
                    for prefix, _, names in (warning.partition(": ") for warning in job.warnings)]
    for group in job.groups:
        group.ports = tuple(sorted(group.ports, key=lambda port: port.label))
        for task in group.tasks:
            ports = tuple(sorted(task.resources.ports, key=lambda port: port.label))
            task.resources = dataclasses.replace(task.resources, ports=ports)
    return job


_DURATIONS = {"kill_timeout", "shutdown_delay", "interval", "delay", "timeout", "grace", "min_healthy_time",
              "healthy_deadline", "progress_deadline", "stagger"}


def _same(left: object, right: object, key: str = "") -> bool:
    """Equal documents, durations compared by value (Nomad's JSON gives them back in seconds);
    a zero value (``sidecar = false``) the same as none, as Nomad's JSON cannot tell them apart."""
    if key in _DURATIONS:
        return isinstance(left, (str, int, float)) and isinstance(right, (str, int, float)) \
            and parse_duration(left) == parse_duration(right)
    if isinstance(left, dict) and isinstance(right, dict):
        return all(_same(left[k], right[k], k) if k in left and k in right else _zero(left.get(k, right.get(k)))
                   for k in left.keys() | right.keys())
    if key == "ports" and isinstance(left, list) and isinstance(right, list):  # network ports, or docker's
        left, right = (sorted(ports, key=lambda port: json.dumps(port, sort_keys=True)) for ports in (left, right))
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(a, b, key) for a, b in zip(left, right, strict=True))
    return left == right


def _zero(value: object) -> bool:
    return value in (None, "", 0, False, [], {})


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
    assert group.ephemeral_disk.size == 300 and not group.ephemeral_disk.carried
    assert group.reschedule is not None and (group.reschedule.attempts, group.reschedule.delay) == (1, 5.0)


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
    assert job.groups[0].network.mode == "bridge" and job.warnings == []


def _structs(struct: Struct, seen: dict[int, Struct]) -> dict[int, Struct]:
    """``struct`` and every struct below it."""
    seen[id(struct)] = struct
    for kind in struct.fields.values():
        inner = kind.struct if isinstance(kind, (ListOf, MapOf)) else kind
        if isinstance(inner, Struct) and id(inner) not in seen:
            _structs(inner, seen)
    return seen


def _at_zero(struct: Struct) -> dict[str, Any]:
    """Every field of ``struct`` as Nomad's command line sends it unset: its zero value, or null."""
    zeros: dict[str, Any] = {}
    for key, kind in struct.fields.items():
        if isinstance(kind, Struct):
            zeros[key] = None if kind.keep_empty else _at_zero(kind)
        elif kind is VALUE or isinstance(kind, (ListOf, MapOf)):
            zeros[key] = None
        elif kind is SERVER:
            zeros[key] = "set by a server"
        else:
            zeros[key] = copy.deepcopy(kind)
    return zeros


@pytest.mark.parametrize("struct", [s for s in _structs(JOB, {}).values() if not s.keep_empty],
                         ids=lambda struct: ",".join(list(struct.fields)[:3]))
def test_a_struct_with_every_field_at_its_zero_value_is_unset(struct: Struct) -> None:
    assert normalized(_at_zero(struct), struct) == {}


def test_every_field_of_a_job_at_its_zero_value_leaves_the_job_bare() -> None:
    assert normalized({**_at_zero(JOB), "ID": "x"}) == {"ID": "x"}


def test_a_pointer_field_keeps_its_zero_and_a_block_that_means_something_empty_stays() -> None:
    job = {"ID": "x", "Priority": 0, "ParameterizedJob": {"Payload": "", "MetaRequired": None},
           "TaskGroups": [{"Name": "g", "Count": 0, "RestartPolicy": {"Attempts": 0, "Mode": None},
                           "Tasks": [{"Name": "t", "Lifecycle": {"Hook": "", "Sidecar": True}}]}]}
    assert normalized(job) == {"ID": "x", "Priority": 0, "ParameterizedJob": {},
                               "TaskGroups": [{"Name": "g", "Count": 0, "Tasks": [{"Name": "t"}],
                                               "RestartPolicy": {"Attempts": 0}}]}


def test_fields_come_in_nomads_order_and_server_fields_go() -> None:
    job = {"Version": 3, "Status": "running", "TaskGroups": [], "Name": "x", "ID": "x", "Later": 1}
    assert list(normalized(job)) == ["ID", "Name", "TaskGroups", "Later"]


CLI_SERVICE = {  # as `nomad job run -output` writes a group's service with a check (Nomad 1.1.2)
    "Id": "", "Name": "web", "Tags": ["a"], "CanaryTags": None, "EnableTagOverride": False, "PortLabel": "http",
    "AddressMode": "", "CheckRestart": None, "Connect": None, "Meta": None, "CanaryMeta": None, "TaskName": "",
    "OnUpdate": "", "Checks": [{
        "Id": "", "Name": "alive", "Type": "tcp", "Command": "", "Args": None, "Path": "", "Protocol": "",
        "PortLabel": "", "Expose": False, "AddressMode": "", "Interval": 10_000_000_000, "Timeout": 2_000_000_000,
        "InitialStatus": "", "TLSSkipVerify": False, "Header": None, "Method": "", "CheckRestart": None,
        "GRPCService": "", "GRPCUseTLS": False, "TaskName": "", "SuccessBeforePassing": 0,
        "FailuresBeforeCritical": 0, "Body": "", "OnUpdate": ""}]}


def _group_job(**group: Any) -> str:
    return json.dumps({"Job": {"ID": "x", "TaskGroups": [{
        "Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}], **group}]}})


def test_a_service_and_check_as_the_cli_sends_them_load_without_a_warning() -> None:
    network = {"Mode": "", "Device": "", "CIDR": "", "IP": "", "DNS": None, "ReservedPorts": None, "MBits": None,
               "DynamicPorts": [{"Label": "http", "Value": 0, "To": 0, "HostNetwork": ""}]}
    job = load_job_text(_group_job(Networks=[network], Services=[CLI_SERVICE]), "json", "job.json")
    [service] = job.groups[0].services
    assert (service.name, service.port, service.address_mode) == ("web", "http", "auto")
    assert [(check.name, check.type, check.interval) for check in service.checks] == [("alive", "tcp", 10.0)]
    assert job.warnings == []


@pytest.mark.parametrize(("where", "field", "value", "named"), [
    ("service", "Id", "web-1", "service.id"),
    ("service", "TaskName", "t", "service.task"),
    ("service", "EnableTagOverride", True, "service.enable_tag_override"),
    ("check", "SuccessBeforePassing", 2, "check.success_before_passing"),
    ("network", "Device", "eth0", "network.device"),
    ("network", "CIDR", "10.0.0.0/8", "network.cidr"),
    ("port", "HostNetwork", "public", "port.host_network"),
])
def test_an_unused_field_holding_something_is_warned_about_by_its_path(where: str, field: str, value: Any,
                                                                       named: str) -> None:
    service = copy.deepcopy(CLI_SERVICE)
    port = {"Label": "http", "Value": 0, "To": 0, "HostNetwork": ""}
    network = {"Mode": "", "Device": "", "CIDR": "", "IP": "", "DynamicPorts": [port]}
    {"service": service, "check": service["Checks"][0], "network": network, "port": port}[where][field] = value
    job = load_job_text(_group_job(Networks=[network], Services=[service]), "json", "job.json")
    assert job.warnings == [f"ignoring stanzas herder does not implement: {named}"]
