"""Nomad's defaults, and the restart policy rules."""

from __future__ import annotations

import pytest

from herder.model import LogConfig, Resources, RestartPolicy

from .helpers import load, problems, task_hcl


def test_defaults_of_a_minimal_job() -> None:
    job = load(task_hcl(""))
    group = job.groups[0]
    task = group.tasks[0]
    assert (job.type, job.datacenters, job.region, job.meta, job.warnings) == ("service", ["dc1"], "global", {}, [])
    assert (group.count, group.meta) == (1, {})
    assert group.restart == RestartPolicy(attempts=2, interval=1800.0, delay=15.0, mode="fail")
    assert (task.kill_timeout, task.kill_signal, task.shutdown_delay, task.user, task.leader) == (
        5.0,
        "",
        0.0,
        "",
        False,
    )
    assert task.resources == Resources(cpu=100, memory=300, ports=())
    assert task.logs == LogConfig(max_files=10, max_file_size=10)
    assert (task.config, task.env, task.services, task.artifacts, task.templates, task.restart) == (
        {},
        {},
        (),
        (),
        (),
        None,
    )


def test_batch_jobs_restart_differently() -> None:
    job = load('job "b" {\n  type = "batch"\n  task "t" { driver = "raw_exec" }\n}')
    assert job.groups[0].restart == RestartPolicy(attempts=3, interval=86400.0, delay=15.0, mode="fail")


def test_a_partial_restart_block_fills_the_rest_from_the_defaults() -> None:
    job = load(task_hcl("", group_body='restart {\n attempts = 5\n mode = "delay"\n }'))
    assert job.groups[0].restart == RestartPolicy(attempts=5, interval=1800.0, delay=15.0, mode="delay")


def test_a_task_restart_block_applies_over_its_groups() -> None:
    job = load(task_hcl('restart { delay = "1s" }', group_body="restart { attempts = 7 }"))
    group = job.groups[0]
    assert group.restart == RestartPolicy(attempts=7, interval=1800.0, delay=15.0, mode="fail")
    assert group.tasks[0].restart == RestartPolicy(attempts=7, interval=1800.0, delay=1.0, mode="fail")


@pytest.mark.parametrize(
    ("restart", "expected"),
    [
        ('attempts = 0\n mode = "delay"', "restart.attempts: 0 attempts in mode 'delay' is ambiguous"),
        ('interval = "4s"\n attempts = 0', "restart.interval: must be at least 5s"),
        ('attempts = 3\n delay = "1m"\n interval = "2m"', "restart: cannot restart 3 times in an interval of 2m"),
        ('attempts = 3\n delay = "1m"\n interval = "2m"\n mode = "delay"', "restart: cannot restart 3 times"),
    ],
)
def test_restart_policy_rules(restart: str, expected: str) -> None:
    errors = problems(task_hcl("", group_body=f"restart {{\n {restart}\n }}"))
    assert any(expected in error for error in errors), errors


def test_a_task_restart_block_is_checked_too() -> None:
    errors = problems(task_hcl('restart { interval = "1s" }'))
    assert any("tasks[0].restart.interval: must be at least 5s" in error for error in errors)


def test_check_interval_and_timeout_are_required() -> None:
    errors = problems(
        task_hcl("""
      service {
        port = 80
        check { type = "tcp" }
      }
    """)
    )
    assert any("checks[0].interval: is required" in error for error in errors)
    assert any("checks[0].timeout: is required" in error for error in errors)


def test_a_ported_check_needs_a_port() -> None:
    errors = problems(
        task_hcl("""
      service {
        check {
          type = "tcp"
          interval = "10s"
          timeout = "2s"
        }
      }
    """)
    )
    assert any("checks[0].port: is required for tcp checks" in error for error in errors)


def test_a_check_may_name_its_own_port() -> None:
    job = load(
        task_hcl("""
      resources {
        network {
          port "http" {}
          port "health" {}
        }
      }
      service {
        port = "http"
        check {
          type = "http"
          port = "health"
          path = "/"
          interval = "10s"
          timeout = "2s"
        }
      }
    """)
    )
    assert job.groups[0].tasks[0].services[0].checks[0].port == "health"


def test_a_template_needs_data_or_source() -> None:
    errors = problems(task_hcl('template { destination = "local/x" }'))
    assert any("templates[0]: needs data or source" in error for error in errors)


def test_static_ports_of_a_task_must_differ() -> None:
    errors = problems(
        task_hcl("""
      resources {
        network {
          port "a" { static = 8080 }
          port "b" { static = 8080 }
        }
      }
    """)
    )
    assert any("ports[1].static: static port 8080 is already used by port 'a'" in error for error in errors)
