"""What real Nomad job files write and Nomad reads: HCL2's type conversion, heredoc closers with trailing
spaces, ``memory_max = -1``, port labels that differ only in case, Connect gateway groups."""

from __future__ import annotations

import pytest

from herder.model import PortSpec
from tests.core.jobspec.helpers import load, problems, task_hcl

CONVERTED = task_hcl("""
      config { command = "/bin/true" }
      leader = "true"
      user   = 1000
      kill_timeout = 5
      resources {
        cpu    = "200"
        memory = "256"
        network {
          port "http" { static = "9001" }
          port "db"   { to = "5432" }
        }
      }
      meta { build = 42 }
""")


def test_strings_become_numbers_and_bools_and_numbers_strings_where_the_schema_wants_them() -> None:
    task = load(CONVERTED).groups[0].tasks[0]
    assert (task.resources.cpu, task.resources.memory) == (200, 256)
    assert task.resources.ports == (PortSpec(label="http", static=9001), PortSpec(label="db", to=5432))
    assert task.leader is True and task.user == "1000" and task.meta == {"build": "42"}


@pytest.mark.parametrize(("value", "message"), [
    ('"abc"', "'abc' is not a number"),
    ('"1.5"', "'1.5' is not a whole number"),
])
def test_a_string_that_does_not_convert_names_its_path_line_and_value(value: str, message: str) -> None:
    text = task_hcl(f"""
      config {{ command = "/bin/true" }}
      resources {{
        memory = {value}
      }}
""")
    assert problems(text) == [f"job.hcl:10: job.groups[0].tasks[0].resources.memory: {message}"]


def test_a_bool_that_does_not_convert_is_named() -> None:
    text = task_hcl('      config { command = "/bin/true" }\n      leader = "yes"')
    assert problems(text) == ["job.hcl:8: job.groups[0].tasks[0].leader: 'yes' is not a bool"]


def test_yaml_is_not_converted() -> None:
    text = """
job:
  name: web
  groups:
    - name: app
      tasks:
        - {name: server, driver: raw_exec, config: {command: /bin/true}, resources: {cpu: "200"}}
"""
    assert problems(text, "yaml") == ["job.yaml:7: job.groups[0].tasks[0].resources.cpu: must be an integer, not '200'"]


def test_a_heredoc_closer_may_have_trailing_spaces_and_end_the_file() -> None:
    text = task_hcl('''
      config { command = "/bin/true" }
      template {
        destination = "local/a"
        data = <<EOH
port={{ env "NOMAD_PORT_http" }}
EOH   \n      }
      template {
        destination = "local/b"
        data = <<-EOT
          indented
          EOT\t
      }
''')
    templates = load(text).groups[0].tasks[0].templates
    assert [template.data for template in templates] == ['port={{ env "NOMAD_PORT_http" }}\n', "indented\n"]


def test_memory_max_minus_one_is_unlimited() -> None:
    resources = load(task_hcl('      config { command = "/bin/true" }\n      resources { memory_max = -1 }')) \
        .groups[0].tasks[0].resources
    assert resources.memory_max == -1
    text = task_hcl('      config { command = "/bin/true" }\n      resources { memory_max = -2 }')
    assert problems(text) == ["job.hcl:8: job.groups[0].tasks[0].resources.memory_max: -2 is below -1"]


def test_port_labels_that_differ_only_in_case_collide() -> None:
    # Nomad 0.6's jobspec fixture overlapping-ports.hcl
    text = """
job "foo" {
  group "bar" {
    task "bar" {
      driver = "docker"
      config { image = "x" }
      resources {
        network {
          port "Http" {}
          port "http" {}
          port "HTTP" {}
        }
      }
    }
  }
}
"""
    assert problems(text) == [
        "job.hcl:10: job.groups[0].tasks[0].resources.network.ports[1].label: "
        "port label 'http' collides with 'Http' (labels must differ in more than case)",
        "job.hcl:11: job.groups[0].tasks[0].resources.network.ports[2].label: "
        "port label 'HTTP' collides with 'Http' (labels must differ in more than case)",
    ]


GATEWAY = """
  group "ingress" {
    network {
      mode = "bridge"
      port "inbound" { static = 8080 }
    }
    service {
      name = "ingress"
      port = "8080"
      connect {
        gateway {
          proxy {}
          ingress {
            listener {
              port = 8080
              service { name = "api" }
            }
          }
        }
      }
    }
  }
"""


def test_a_connect_gateway_group_is_left_out_with_one_warning() -> None:
    text = f"""
job "demo" {{
{GATEWAY}
  group "api" {{
    task "api" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
      resources {{ memory = "x" }}
    }}
  }}
}}
"""
    # The group after the gateway keeps its own line in messages.
    assert problems(text) == ["job.hcl:30: job.groups[0].tasks[0].resources.memory: 'x' is not a number"]
    job = load(text.replace('"x"', "64"))
    assert [group.name for group in job.groups] == ["api"]
    assert job.warnings == ["herder does not run Connect gateways: group(s) ingress left out"]


def test_a_job_of_gateways_only_is_an_error() -> None:
    assert problems(f'job "demo" {{\n{GATEWAY}\n}}\n') == [
        "job.hcl:3: job.groups: holds only Connect gateway groups, which herder does not run"]
