"""``constraint`` blocks as Nomad's jobspec reads them (shorthand keys included) and validates them;
``affinity`` and ``spread`` accepted without a word."""

from __future__ import annotations

import json

import pytest

from herder.jobspec.nomad_json import to_nomad
from herder.model import Constraint

from .helpers import load, problems, task_hcl


def constraints(block: str) -> tuple[Constraint, ...]:
    return load(task_hcl('      config { command = "/bin/true" }', block)).groups[0].constraints


@pytest.mark.parametrize(("block", "expected"), [
    ('attribute = "${attr.kernel.name}"\nvalue = "linux"', Constraint("${attr.kernel.name}", "=", "linux")),
    ('attribute = "${attr.cpu.numcores}"\noperator = ">="\nvalue = 4',
     Constraint("${attr.cpu.numcores}", ">=", "4")),
    ('attribute = "${attr.kernel.version}"\nversion = ">= 4.0"',
     Constraint("${attr.kernel.version}", "version", ">= 4.0")),
    ('attribute = "${attr.nomad.version}"\nsemver = ">= 1.0.0"',
     Constraint("${attr.nomad.version}", "semver", ">= 1.0.0")),
    ('attribute = "${meta.rack}"\nregexp = "^r[0-9]+$"', Constraint("${meta.rack}", "regexp", "^r[0-9]+$")),
    ('attribute = "${meta.tags}"\nset_contains = "ssd,gpu"', Constraint("${meta.tags}", "set_contains", "ssd,gpu")),
    ('attribute = "${meta.tags}"\nset_contains_any = "ssd"', Constraint("${meta.tags}", "set_contains_any", "ssd")),
    ('distinct_hosts = true', Constraint("", "distinct_hosts", "true")),
    ('distinct_property = "${meta.rack}"\nvalue = "2"', Constraint("${meta.rack}", "distinct_property", "2")),
    ('is_set = "${meta.rack}"', Constraint("${meta.rack}", "is_set", "")),
    ('attribute = "${meta.rack}"\noperator = "is_not_set"', Constraint("${meta.rack}", "is_not_set", "")),
])
def test_a_constraint_block_and_its_shorthands(block: str, expected: Constraint) -> None:
    assert constraints(f"    constraint {{\n{block}\n    }}") == (expected,)


def test_constraints_at_every_level_and_affinity_and_spread_without_a_warning() -> None:
    job = load("""
        job "web" {
          constraint {
            attribute = "${attr.kernel.name}"
            value     = "linux"
          }
          affinity {
            attribute = "${node.datacenter}"
            value     = "dc1"
            weight    = 50
          }
          group "app" {
            spread { attribute = "${node.unique.id}" }
            constraint { distinct_hosts = true }
            task "server" {
              driver = "raw_exec"
              config { command = "/bin/true" }
              constraint {
                attribute = "${attr.cpu.arch}"
                value     = "amd64"
              }
              affinity {
                attribute = "${meta.rack}"
                value     = "r1"
              }
            }
          }
        }
    """)
    assert job.warnings == []
    assert [str(c) for c in job.constraints] == ["${attr.kernel.name} = linux"]
    assert [c.operator for c in job.groups[0].constraints] == ["distinct_hosts"]
    assert [str(c) for c in job.groups[0].tasks[0].constraints] == ["${attr.cpu.arch} = amd64"]


@pytest.mark.parametrize(("block", "message"), [
    ('attribute = "${meta.rack}"\nregexp = "(?<=x)y"', "the regular expression does not compile"),
    ('attribute = "${attr.kernel.version}"\nversion = "about four"', "version constraint 'about four' is invalid"),
    ('attribute = "${attr.kernel.version}"\nsemver = "~> 1.0"', "semver constraint '~> 1.0' is invalid"),
    ('distinct_property = "${meta.rack}"\nvalue = "0"', "distinct_property's value is the allowed count"),
    ('attribute = "${meta.rack}"\noperator = "is_set"\nvalue = "x"', "operator 'is_set' takes no value"),
    ('attribute = "${meta.rack}"', "operator '=' needs a value"),
    ('value = "linux"', "operator '=' needs an attribute"),
    ('attribute = "${meta.tags}"\noperator = "set_contains"', "a set_contains constraint needs a value"),
])
def test_an_invalid_constraint_is_named_by_its_path(block: str, message: str) -> None:
    errors = problems(task_hcl('      config { command = "/bin/true" }', f"    constraint {{\n{block}\n    }}"))
    assert any("job.groups[0].constraints[0]" in error and message in error for error in errors), errors


def test_an_unknown_operator_is_refused() -> None:
    errors = problems(task_hcl('      config { command = "/bin/true" }',
                               '    constraint {\n attribute = "${meta.a}"\n operator = "~="\n value = "x"\n }'))
    assert any("job.groups[0].constraints[0].operator" in error for error in errors), errors


def test_nomad_json_constraints_round_trip() -> None:
    document = {"Job": {"ID": "web", "Constraints": [{"LTarget": "${attr.kernel.name}", "RTarget": "linux",
                                                      "Operand": "="}],
                        "TaskGroups": [{"Name": "app", "Affinities": [{"LTarget": "${meta.a}", "RTarget": "b",
                                                                       "Operand": "=", "Weight": 50}],
                                        "Tasks": [{"Name": "t", "Driver": "raw_exec",
                                                   "Config": {"command": "/bin/true"},
                                                   "Constraints": [{"LTarget": "${meta.rack}", "RTarget": "^r",
                                                                    "Operand": "regexp"}]}]}]}}
    job = load(json.dumps(document), "json")
    assert job.warnings == []
    assert job.constraints == (Constraint("${attr.kernel.name}", "=", "linux"),)
    assert job.groups[0].tasks[0].constraints == (Constraint("${meta.rack}", "regexp", "^r"),)
    back = to_nomad({"job": {"name": "web", "constraints": [{"attribute": "${a}", "operator": "=", "value": "b"}],
                             "groups": []}})
    assert back["Job"]["Constraints"] == [{"LTarget": "${a}", "Operand": "=", "RTarget": "b"}]


def test_yaml_constraints() -> None:
    job = load("""
        job:
          name: web
          datacenters: ["dc*"]
          constraints: [{attribute: "${meta.rack}", operator: set_contains_any, value: "r1,r2"}]
          groups:
            - name: app
              tasks: [{name: t, driver: raw_exec, resources: {disk: 50}}]
    """, "yaml")
    assert job.constraints == (Constraint("${meta.rack}", "set_contains_any", "r1,r2"),)
    assert job.datacenters == ["dc*"]
    assert job.groups[0].ephemeral_disk.size == 50


def test_yaml_may_use_nomads_name_for_them() -> None:
    job = load("""
        job:
          name: web
          constraint: {attribute: "${meta.rack}", value: r1}
          groups:
            - name: app
              constraint: [{distinct_hosts: true}]
              tasks: [{name: t, driver: raw_exec, constraint: {attribute: "${attr.cpu.arch}", value: amd64}}]
    """, "yaml")
    assert job.constraints == (Constraint("${meta.rack}", "=", "r1"),)
    assert job.groups[0].constraints == (Constraint("", "distinct_hosts", "true"),)
    assert job.groups[0].tasks[0].constraints == (Constraint("${attr.cpu.arch}", "=", "amd64"),)
