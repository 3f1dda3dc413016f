"""Input variables: declarations, --var values, ${var.NAME} references."""

from __future__ import annotations

import pytest

from .helpers import load, problems

HCL = """
variable "image" {
  type        = string
  default     = "busybox:1"
  description = "the image to run"
}

variable "replicas" {
  type    = number
  default = 2
}

variable "debug" {
  type    = bool
  default = false
}

variable "datacenters" {
  type    = list(string)
  default = ["dc1"]
}

variable "version" {}

job "web" {
  datacenters = var.datacenters
  group "app" {
    count = var.replicas
    task "server" {
      driver = "docker"
      config {
        image = var.image
        args  = ["--debug=${var.debug}", "${NOMAD_PORT_http}", "$${var.image}"]
      }
      meta {
        version = "${var.version}"
      }
    }
  }
}
"""


def test_defaults_and_given_values() -> None:
    job = load(HCL, variables={"version": "1.10", "replicas": "4"})
    task = job.groups[0].tasks[0]
    assert job.datacenters == ["dc1"]
    assert job.groups[0].count == 4
    assert task.config == {"image": "busybox:1", "args": ["--debug=false", "${NOMAD_PORT_http}", "${var.image}"]}
    assert task.meta == {"version": "1.10"}


def test_typed_values_from_the_command_line() -> None:
    job = load(HCL, variables={"version": "2", "debug": "true", "datacenters": '["a", "b"]', "image": "7"})
    assert job.datacenters == ["a", "b"]
    assert job.groups[0].tasks[0].config["args"][0] == "--debug=true"
    assert job.groups[0].tasks[0].config["image"] == "7"
    assert job.groups[0].tasks[0].meta == {"version": "2"}


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({}, "job.hcl:36: job.groups[0].tasks[0].meta.version: variable 'version' has no value"),
        (
            {"version": "1", "colour": "red"},
            "job.hcl: variable 'colour' is given a value but the job file does not declare it",
        ),
        (
            {"version": "1", "replicas": "many"},
            "job.hcl:8: variables.replicas: the value given, 'many', is not a number",
        ),
        ({"version": "1", "debug": "yes"}, "variables.debug: the value given, 'yes', is not true or false"),
        ({"version": "1", "datacenters": "dc1"}, "is not a valid list(string) (write it as JSON)"),
    ],
)
def test_variable_problems(variables: dict[str, str], expected: str) -> None:
    errors = problems(HCL, variables=variables)
    assert any(expected in error for error in errors), errors


def test_untyped_string_values_become_numbers_only_where_numbers_belong() -> None:
    yaml_job = """
        variables:
          n: {}
        job:
          name: web
          groups:
            - name: app
              count: "${var.n}"
              tasks:
                - name: server
                  driver: raw_exec
                  env: {N: "${var.n}"}
                  config: {args: ["${var.n}"]}
    """
    job = load(yaml_job, "yaml", {"n": "3"})
    task = job.groups[0].tasks[0]
    assert job.groups[0].count == 3
    assert (task.env, task.config) == ({"N": "3"}, {"args": ["3"]})
    errors = problems(yaml_job, "yaml", {"n": "three"})
    assert any("job.groups[0].count: 'three' is not a number" in error for error in errors)


def test_a_list_variable_cannot_be_part_of_a_string() -> None:
    errors = problems("""
        variable "names" { default = ["a"] }
        job "web" {
          meta { names = "x-${var.names}" }
          task "t" { driver = "raw_exec" }
        }
    """)
    assert any("job.meta.names: var.names is a list and cannot be part of a string" in error for error in errors)


def test_variables_shorthand_block() -> None:
    job = load("""
        variables {
          memory = 128
        }
        job "web" {
          task "t" {
            driver = "raw_exec"
            resources { memory = var.memory }
          }
        }
    """)
    assert job.groups[0].tasks[0].resources.memory == 128


def test_unknown_declaration_keys_are_errors() -> None:
    errors = problems(
        'variable "x" {\n  default = 1\n  colour = "red"\n}\njob "web" {\n  task "t" { driver = "raw_exec" }\n}'
    )
    assert any("job.hcl:3: variables.x.colour: unknown key 'colour'" in error for error in errors), errors


def test_variables_in_yaml_and_json() -> None:
    yaml_job = load(
        """
        variables: {who: {default: world}}
        job: {name: hi, groups: [{name: g, tasks: [{name: t, driver: raw_exec, env: {WHO: "${var.who}"}}]}]}
    """,
        "yaml",
    )
    json_job = load(
        """
        {"variables": {"who": {"default": "world"}},
         "job": {"name": "hi", "groups": [{"name": "g", "tasks": [{"name": "t", "driver": "raw_exec",
                                                                   "env": {"WHO": "${var.who}"}}]}]}}
    """,
        "json",
    )
    assert yaml_job == json_job
    assert yaml_job.groups[0].tasks[0].env == {"WHO": "world"}
