"""Service blocks in job files: group services, a check's task, service-level check_restart."""

from __future__ import annotations

import textwrap

import pytest

from herder.errors import JobError
from herder.jobspec import load_job_text
from herder.model import CheckRestart


def load(text: str):  # type: ignore[no-untyped-def]
    return load_job_text(textwrap.dedent(text), "hcl", "job.hcl")


def group_job(service: str) -> str:
    return f'''
    job "j" {{
      group "g" {{
        network {{
          port "http" {{}}
        }}
        {service}
        task "t" {{
          driver = "raw_exec"
          config {{ command = "/bin/true" }}
        }}
      }}
    }}
    '''


def test_a_group_service_is_read_on_the_group_ports() -> None:
    job = load(group_job('service {\n port = "http"\n check {\n type = "tcp"\n interval = "5s"\n'
                         ' timeout = "1s"\n }\n }'))
    [service] = job.groups[0].services
    assert (service.name, service.port, service.checks[0].type) == ("j-g", "http", "tcp")
    assert not job.warnings


def test_a_group_script_check_must_name_a_task_of_the_group() -> None:
    def service(task: str) -> str:
        return ('service {\n port = "http"\n check {\n type = "script"\n command = "/bin/true"\n'
                f' interval = "5s"\n timeout = "1s"\n {task}\n }}\n }}')

    with pytest.raises(JobError) as missing:
        load(group_job(service("")))
    assert "job.groups[0].services[0].checks[0].task" in str(missing.value)
    assert "(one of: t)" in str(missing.value)
    with pytest.raises(JobError, match="names no task of the group"):
        load(group_job(service('task = "nope"')))
    job = load(group_job(service('task = "t"')))
    assert job.groups[0].services[0].checks[0].task == "t"


def test_a_group_service_port_must_be_a_group_port() -> None:
    with pytest.raises(JobError, match="port 'web' is not a port label of the group"):
        load(group_job('service {\n port = "web"\n }'))


def test_a_task_check_may_not_name_a_task() -> None:
    with pytest.raises(JobError, match=r"checks\[0\]\.task: is only for the checks of a group service"):
        load('''
        job "j" {
          group "g" {
            task "t" {
              driver = "raw_exec"
              config { command = "/bin/true" }
              service {
                check {
                  type = "script"
                  task = "t"
                  command = "/bin/true"
                  interval = "5s"
                  timeout = "1s"
                }
              }
            }
          }
        }
        ''')


def test_a_service_check_restart_applies_to_its_checks_without_one() -> None:
    job = load(group_job('''service {
      port = "http"
      check_restart {
        limit = 3
        grace = "10s"
      }
      check {
        type = "tcp"
        interval = "5s"
        timeout = "1s"
      }
      check {
        type = "tcp"
        interval = "5s"
        timeout = "1s"
        check_restart {
          limit = 1
        }
      }
    }'''))
    first, second = job.groups[0].services[0].checks
    assert first.check_restart == CheckRestart(limit=3, grace=10.0)
    assert second.check_restart == CheckRestart(limit=1, grace=1.0)
