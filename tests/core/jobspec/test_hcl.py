"""Nomad's HCL jobspec constructs and their canonical meaning."""

from __future__ import annotations

from herder.model import Check, CheckRestart, PortSpec

from .helpers import load, problems, task_hcl


def test_job_group_task_blocks_and_their_labels() -> None:
    job = load("""
        job "web" {
          datacenters = ["dc1", "dc2"]
          region = "eu"
          group "app" {
            count = 3
            task "a" { driver = "raw_exec" }
            task "b" { driver = "docker" }
          }
          group "db" {
            task "c" { driver = "exec" }
          }
        }
    """)
    assert (job.name, job.datacenters, job.region) == ("web", ["dc1", "dc2"], "eu")
    assert [(group.name, group.count, [task.name for task in group.tasks]) for group in job.groups] == [
        ("app", 3, ["a", "b"]),
        ("db", 1, ["c"]),
    ]
    assert [task.driver for task in job.groups[0].tasks] == ["raw_exec", "docker"]


def test_a_task_directly_under_the_job_forms_a_group_of_its_name() -> None:
    job = load("""
        job "web" {
          group "first" {
            task "a" { driver = "raw_exec" }
          }
          task "lone" { driver = "raw_exec" }
          group "last" {
            task "b" { driver = "raw_exec" }
          }
        }
    """)
    assert [(group.name, [task.name for task in group.tasks]) for group in job.groups] == [
        ("first", ["a"]),
        ("lone", ["lone"]),
        ("last", ["b"]),
    ]


def test_config_env_meta_as_blocks_or_attributes() -> None:
    job = load("""
        job "web" {
          meta { owner = "ops" }
          group "app" {
            meta = { tier = "front" }
            task "server" {
              driver = "docker"
              config {
                image = "busybox"
                args  = ["-p", "${NOMAD_PORT_http}"]
                port_map {
                  http = 8080
                }
                labels {
                  team = "web"
                }
                mount {
                  target = "/a"
                }
                mount {
                  target = "/b"
                }
              }
              env = { PORT = 8080, DEBUG = true, "dotted.name" = "x" }
              meta { version = 2 }
            }
          }
        }
    """)
    task = job.groups[0].tasks[0]
    assert task.config == {
        "image": "busybox",
        "args": ["-p", "${NOMAD_PORT_http}"],
        "port_map": {"http": 8080},
        "labels": {"team": "web"},
        "mount": [{"target": "/a"}, {"target": "/b"}],
    }
    assert task.env == {"PORT": "8080", "DEBUG": "true", "dotted.name": "x"}
    assert (job.meta, job.groups[0].meta, task.meta) == ({"owner": "ops"}, {"tier": "front"}, {"version": "2"})


def test_ports_inside_resources_network() -> None:
    job = load(
        task_hcl("""
      resources {
        cpu = 500
        memory = 256
        network {
          port "http" {}
          port "admin" { static = 8081 }
          port "db" { to = 5432 }
        }
      }
    """)
    )
    resources = job.groups[0].tasks[0].resources
    assert (resources.cpu, resources.memory) == (500, 256)
    assert resources.ports == (PortSpec("http"), PortSpec("admin", static=8081), PortSpec("db", to=5432))


def test_group_network_ports_belong_to_the_group() -> None:
    job = load("""
        job "web" {
          group "app" {
            network {
              port "http" { to = 80 }
            }
            task "a" { driver = "raw_exec" }
            task "b" {
              driver = "raw_exec"
              resources {
                network {
                  port "admin" {}
                }
              }
            }
          }
        }
    """)
    group = job.groups[0]
    a, b = group.tasks
    assert group.ports == (PortSpec("http", to=80),)
    assert (a.resources.ports, b.resources.ports) == ((), (PortSpec("admin"),))


def test_repeated_service_check_artifact_and_template_blocks() -> None:
    job = load(
        task_hcl("""
      resources {
        network {
          port "http" {}
        }
      }
      service {
        name = "web"
        port = "http"
        tags = ["a", "b"]
        meta { version = "1" }
        check {
          type     = "http"
          path     = "/health"
          interval = "10s"
          timeout  = "2s"
          header { X-Token = ["t"] }
        }
        check {
          name     = "ready"
          type     = "script"
          command  = "/bin/test"
          args     = ["-f", "/local/ready"]
          interval = "5s"
          timeout  = "1s"
          check_restart {
            limit           = 3
            grace           = "90s"
            ignore_warnings = true
          }
        }
      }
      service {
        port = 9000
        address_mode = "driver"
      }
      artifact {
        source = "https://example.com/a.tgz"
        options { checksum = "md5:11111111111111111111111111111111" }
      }
      artifact {
        source      = "https://example.com/b"
        destination = "local/b"
        mode        = "file"
      }
      template {
        data        = <<EOT
        value = {{ key "x" }}
        EOT
        destination = "local/a.conf"
      }
      template {
        source        = "local/b.tpl"
        destination   = "local/b.conf"
        change_mode   = "signal"
        change_signal = "SIGHUP"
        perms         = "0600"
      }
    """)
    )
    task = job.groups[0].tasks[0]
    web, other = task.services
    assert (web.name, web.port, web.tags, web.meta, web.address_mode) == (
        "web",
        "http",
        ("a", "b"),
        {"version": "1"},
        "auto",
    )
    assert web.checks[0] == Check(
        type="http", name='service: "web" check', interval=10.0, timeout=2.0, path="/health", header={"X-Token": ("t",)}
    )
    assert web.checks[1].name == "ready"
    assert web.checks[1].args == ("-f", "/local/ready")
    assert web.checks[1].check_restart == CheckRestart(limit=3, grace=90.0, ignore_warnings=True)
    assert (other.name, other.port, other.address_mode) == ("web-app-server", "9000", "driver")
    assert [(a.source, a.destination, a.mode, a.options) for a in task.artifacts] == [
        ("https://example.com/a.tgz", "local/", "any", {"checksum": "md5:11111111111111111111111111111111"}),
        ("https://example.com/b", "local/b", "file", {}),
    ]
    first, second = task.templates
    assert 'value = {{ key "x" }}' in first.data
    assert (first.destination, first.change_mode) == ("local/a.conf", "restart")
    assert (second.source, second.change_signal, second.perms) == ("local/b.tpl", "SIGHUP", "0600")


def test_logs_and_task_fields() -> None:
    job = load(
        task_hcl("""
      user = "nobody"
      leader = true
      kill_timeout = "20s"
      kill_signal = "SIGTERM"
      shutdown_delay = "500ms"
      logs {
        max_files     = 3
        max_file_size = 15
      }
    """)
    )
    task = job.groups[0].tasks[0]
    assert (task.user, task.leader, task.kill_signal) == ("nobody", True, "SIGTERM")
    assert (task.kill_timeout, task.shutdown_delay) == (20.0, 0.5)
    assert (task.logs.max_files, task.logs.max_file_size) == (3, 15)


def test_escaped_interpolation_is_left_for_the_runtime() -> None:
    job = load(
        task_hcl("""
      env { LITERAL = "$${NOMAD_TASK_NAME}" }
    """)
    )
    assert job.groups[0].tasks[0].env == {"LITERAL": "${NOMAD_TASK_NAME}"}


def test_problems_name_their_lines() -> None:
    errors = problems("""
        job "web" {
          group "app" {
            task "server" {
              driver = "raw_exec"
              resources {
                memory = "a lot"
              }
            }
          }
        }
    """)
    assert errors == ["job.hcl:7: job.groups[0].tasks[0].resources.memory: 'a lot' is not a number"]


def test_an_attribute_set_twice_is_an_error() -> None:
    errors = problems(task_hcl('user = "a"\n      user = "b"'))
    assert any("tasks[0].user: is set twice" in error for error in errors)


def test_list_blocks_written_as_attributes_are_errors() -> None:
    errors = problems(task_hcl('service = [{ name = "web" }]'))
    assert any("tasks[0].service: must be written as a block" in error for error in errors)


def test_syntax_error_is_short_and_located() -> None:
    errors = problems('job "web" {\n  group "app" {\n    count = = 2\n  }\n}\n')
    assert len(errors) == 1
    assert errors[0].startswith("job.hcl:3:")
    assert "\n" not in errors[0] and "Expected one of" not in errors[0]
