"""Service blocks in job files: group services, a check's task, service-level check_restart."""

from __future__ import annotations

import json
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


def test_a_task_checks_task_is_ignored_with_a_warning_as_nomad_does() -> None:
    job = load('''
        job "j" {
          group "g" {
            task "t" {
              driver = "raw_exec"
              config { command = "/bin/true" }
              service {
                check {
                  type = "script"
                  task = "other"
                  command = "/bin/true"
                  interval = "5s"
                  timeout = "1s"
                }
              }
            }
          }
        }
        ''')
    assert job.groups[0].tasks[0].services[0].checks[0].task == ""
    assert job.warnings == ["job.groups[0].tasks[0].services[0].checks[0].task is ignored: a task service's "
                            "checks run in its task"]


def provider_job(group_provider: str, task_provider: str) -> str:
    def provider(value: str) -> str:
        return f'provider = "{value}"' if value else ""
    return f'''
    job "j" {{
      group "g" {{
        network {{
          port "http" {{}}
        }}
        service {{
          name = "front"
          port = "http"
          {provider(group_provider)}
        }}
        task "t" {{
          driver = "raw_exec"
          config {{ command = "/bin/true" }}
          service {{
            name = "back"
            {provider(task_provider)}
          }}
        }}
      }}
    }}
    '''


def test_a_services_provider_is_read_without_a_warning() -> None:
    job = load(provider_job("nomad", "nomad"))
    assert [job.groups[0].services[0].provider, job.groups[0].tasks[0].services[0].provider] == ["nomad", "nomad"]
    assert job.warnings == []
    assert load(provider_job("", "")).groups[0].services[0].provider == ""
    assert load(provider_job("consul", "")).groups[0].services[0].provider == "consul"


@pytest.mark.parametrize(("group", "task"), [("nomad", ""), ("", "nomad"), ("consul", "nomad")])
def test_a_group_may_not_mix_providers_as_in_nomad(group: str, task: str) -> None:
    """An unset provider is Nomad's default, consul: with nomad beside it, the group mixes two."""
    with pytest.raises(JobError) as refused:
        load(provider_job(group, task))
    [message] = refused.value.errors
    assert message.startswith("job.hcl:")
    assert ("job.groups[0].tasks[0].services[0].provider: Multiple service providers used: task group services "
            "must use the same provider") in message
    assert "at job.groups[0].services[0])" in message


def test_an_unknown_provider_is_refused_naming_it() -> None:
    with pytest.raises(JobError, match=r"job.groups\[0\].services\[0\].provider"):
        load(provider_job("etcd", "etcd"))


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


def test_nomad_json_provider_consul_is_nomads_default_and_nomad_is_kept() -> None:
    """Nomad 1.3's clients send ``consul`` for a service that names no provider: it means the agent's default."""
    def job(provider: str) -> str:
        return json.dumps({"Job": {"ID": "j", "Name": "j", "TaskGroups": [{"Name": "g", "Tasks": [{
            "Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"},
            "Services": [{"Name": "s", "Provider": provider}]}]}]}})

    assert load_job_text(job("consul"), "json", "job.json").groups[0].tasks[0].services[0].provider == ""
    assert load_job_text(job("nomad"), "json", "job.json").groups[0].tasks[0].services[0].provider == "nomad"
