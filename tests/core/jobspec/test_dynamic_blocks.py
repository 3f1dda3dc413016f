"""HCL2 ``dynamic`` blocks: ``for_each``, ``iterator``, ``labels``, ``content``, nested ones too."""

from __future__ import annotations

from herder.model import PortSpec
from tests.core.jobspec.helpers import load, problems


def test_dynamic_ports_from_a_variable_overridden_on_the_command_line() -> None:
    text = """
variable "ports" {
  type    = list(string)
  default = ["http"]
}
job "web" {
  group "app" {
    network {
      port "admin" { static = 9000 }
      dynamic "port" {
        for_each = var.ports
        labels   = [port.value]
        content { to = 8080 + port.key }
      }
    }
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"""
    assert load(text).groups[0].ports == (PortSpec(label="admin", static=9000), PortSpec(label="http", to=8080))
    assert load(text, variables={"ports": '["a", "b"]'}).groups[0].ports == (
        PortSpec(label="admin", static=9000), PortSpec(label="a", to=8080), PortSpec(label="b", to=8081))


def test_nested_dynamic_blocks_with_an_iterator_over_a_map() -> None:
    text = """
locals {
  services = {
    web   = ["/", "/health"]
    admin = ["/admin"]
  }
}
job "web" {
  group "app" {
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      resources {
        network {
          port "web" {}
          port "admin" {}
        }
      }
      dynamic "service" {
        for_each = local.services
        iterator = svc
        content {
          name = "app-${svc.key}"
          port = svc.key
          dynamic "check" {
            for_each = svc.value
            content {
              type     = "http"
              path     = check.value
              interval = "10s"
              timeout  = "2s"
              name     = "${svc.key}-${check.key}"
            }
          }
        }
      }
    }
  }
}
"""
    services = load(text).groups[0].tasks[0].services
    assert [(service.name, service.port) for service in services] == [("app-admin", "admin"), ("app-web", "web")]
    assert [[(check.name, check.path) for check in service.checks] for service in services] == [
        [("admin-0", "/admin")], [("web-0", "/"), ("web-1", "/health")]]


def test_a_dynamic_generic_block_makes_a_list_of_maps_beside_the_written_ones() -> None:
    text = """
job "web" {
  group "app" {
    task "server" {
      driver = "docker"
      config {
        image = "busybox"
        mount {
          type   = "tmpfs"
          target = "/a"
        }
        dynamic "mount" {
          for_each = ["/b", "/c"]
          content {
            type   = "tmpfs"
            target = mount.value
          }
        }
        dynamic "labels" {
          for_each = {team = "core"}
          labels   = ["l"]
          content { team = labels.value }
        }
      }
    }
  }
}
"""
    config = load(text).groups[0].tasks[0].config
    assert [mount["target"] for mount in config["mount"]] == ["/a", "/b", "/c"]
    assert config["labels"] == [{"l": {"team": "core"}}]  # a labelled generic block nests under its labels


def test_dynamic_blocks_of_unimplemented_stanzas_are_dropped_with_the_warning() -> None:
    text = """
job "web" {
  dynamic "constraint" {
    for_each = ["a"]
    content {
      attribute = "${attr.kernel.name}"
      value     = constraint.value
    }
  }
  group "app" {
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/true" }
      dynamic "template" {
        for_each = ["a"]
        content {
          data        = "x"
          destination = "local/${template.value}"
          wait { min = "1s" }
        }
      }
    }
  }
}
"""
    job = load(text)
    assert job.groups[0].tasks[0].templates[0].destination == "local/a"
    assert job.warnings == ["ignoring stanzas herder does not implement: template.wait"]
    assert [str(c) for c in job.constraints] == ["${attr.kernel.name} = a"]  # a dynamic constraint like any other


def test_a_broken_dynamic_block_is_named() -> None:
    task = """
job "web" {
  group "app" {
    network {
      dynamic "port" {
        for_each = %s
        labels = ["a", "b"]
        %s
      }
    }
    task "server" {
      driver = "raw_exec"
      config { command = "/bin/true" }
    }
  }
}
"""
    assert problems(task % ("42", "content {}")) == [
        "job.hcl:5: job.groups[0].network.ports[0].for_each: must be a list or a map, not a number"]
    assert problems(task % ('["x"]', "content {}")) == [
        "job.hcl:5: job.groups[0].network.ports[0].labels: needs one label, not 2"]
    assert problems(task % ('["x"]', "")) == [
        "job.hcl:5: job.groups[0].network.dynamic: a 'dynamic' block needs for_each and one content block"]
    assert problems(task % ('["x"]', "content {}\n        colour = 1")) == [
        "job.hcl:9: job.groups[0].network.dynamic.colour: unknown key 'colour' in a 'dynamic' block"]
