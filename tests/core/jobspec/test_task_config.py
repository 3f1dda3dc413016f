"""Driver config validation against the drivers' schemas."""

from __future__ import annotations

from typing import Any

from herder.jobspec import validate_config, validate_task_configs
from herder.jobspec.task_config import merge_blocks

from .helpers import load

DOCKER: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["image"],
    "properties": {
        "image": {"type": "string"},
        "args": {"type": "array", "items": {"type": "string"}},
        "port_map": {"type": "object", "additionalProperties": {"type": "integer"}},
        "force_pull": {"type": "boolean"},
    },
}
SCHEMAS: dict[str, dict[str, Any] | None] = {"docker": DOCKER, "raw_exec": None}

JOB = """
job "web" {
  group "app" {
    task "ok" {
      driver = "raw_exec"
      config {
        anything = "goes"
      }
    }
    task "server" {
      driver = "docker"
      config {
        args = ["-p", 8080]
        port_map {
          http = "eighty"
          db   = "${NOMAD_META_db_port}"
        }
        force_pull = "${NOMAD_META_pull}"
        colour = "red"
      }
    }
  }
  task "other" {
    driver = "qemu"
  }
}
"""


def test_task_configs_are_checked_with_paths_and_lines() -> None:
    errors = validate_task_configs(load(JOB), SCHEMAS)
    assert errors == [
        "job.hcl:12: job.groups[0].tasks[1].config.image: is required",
        "job.hcl:13: job.groups[0].tasks[1].config.args[1]: must be a string, not 8080",
        "job.hcl:15: job.groups[0].tasks[1].config.port_map.http: must be an integer, not 'eighty'",
        "job.hcl:19: job.groups[0].tasks[1].config.colour: unknown key 'colour'",
        "job.hcl:24: job.groups[1].tasks[0].driver: unknown driver 'qemu' (available: docker, raw_exec)",
    ]


def test_no_drivers_at_all() -> None:
    errors = validate_task_configs(load(JOB), {})
    assert errors[0].endswith("job.groups[0].tasks[0].driver: unknown driver 'raw_exec' (available: none)")


def test_validate_config_for_one_task() -> None:
    assert validate_config("task server", {"image": "x", "port_map": {"http": 80}}, DOCKER) == []
    assert validate_config("task server", {"anything": 1}, None) == []
    assert validate_config("job.groups[0].tasks[0]", {"image": 5}, DOCKER) == [
        "job.groups[0].tasks[0].config.image: must be a string, not 5"
    ]


def test_unresolved_references_fail_once_resolved() -> None:
    assert validate_config("t", {"image": "x", "force_pull": "${NOMAD_META_pull}"}, DOCKER) == []
    assert validate_config("t", {"image": "x", "force_pull": "yes"}, DOCKER) == [
        "t.config.force_pull: must be true or false, not 'yes'"
    ]


def test_an_invalid_driver_schema_is_reported_not_raised() -> None:
    errors = validate_config("t", {"image": "x"}, {"type": "no-such-type"})
    assert len(errors) == 1 and errors[0].startswith("t.config: cannot be checked, the driver's schema is invalid")


def test_a_block_nomads_json_gives_as_a_list_of_maps_is_the_map_the_schema_wants() -> None:
    schema = {"type": "object", "properties": {
        "port_map": {"type": "object"}, "mounts": {"type": "array"},
        "logging": {"type": "object", "properties": {"config": {"type": "object"}}}}}
    config = {"port_map": [{"http": 80}, {"ssh": 22}], "mounts": [{"source": "a"}],
              "logging": [{"type": "syslog", "config": [{"tag": "x"}]}], "other": [{"a": 1}]}
    assert merge_blocks(config, schema) == {
        "port_map": {"http": 80, "ssh": 22}, "mounts": [{"source": "a"}],
        "logging": {"type": "syslog", "config": {"tag": "x"}}, "other": [{"a": 1}]}
    assert merge_blocks(config, None) == config
