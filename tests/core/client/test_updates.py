"""The kind of each update, as Nomad's ``tasksUpdated`` decides: count alone, in place, or destructive."""

from __future__ import annotations

import pytest

from herder.client.updates import group_update
from herder.jobspec import load_job_text
from herder.model import Job

BASE = """
job "web" {{
  meta {{ team = "{team}" }}
  group "app" {{
    count = {count}
    task "server" {{
      driver = "raw_exec"
      config {{ command = "{command}" }}
      env {{ MODE = "{mode}" }}
      kill_timeout = "{kill_timeout}"
      resources {{
        network {{
          port "http" {{}}
        }}
      }}
      service {{
        name = "web"
        port = "http"
        tags = ["{tag}"]
      }}
    }}
    update {{ max_parallel = {max_parallel} }}
  }}
}}
"""
DEFAULTS = {"team": "a", "count": 2, "command": "serve", "mode": "x", "kill_timeout": "5s", "tag": "v1",
            "max_parallel": 1}


def job(**changes: object) -> Job:
    return load_job_text(BASE.format(**(DEFAULTS | changes)), "hcl", "job.hcl", {})


def test_the_same_group_or_a_count_alone_is_ignored() -> None:
    assert group_update(job(), job(), "app").kind == "ignore"
    assert group_update(job(), job(count=3), "app").kind == "ignore"


@pytest.mark.parametrize("change", [{"tag": "v2"}, {"kill_timeout": "9s"}, {"max_parallel": 2}])
def test_services_kill_timeouts_and_the_update_block_change_in_place(change: dict[str, object]) -> None:
    assert group_update(job(), job(**change), "app").kind == "inplace"


@pytest.mark.parametrize(("change", "reason"), [
    ({"command": "other"}, "task server: config"),
    ({"mode": "y"}, "task server: env"),
    ({"team": "b"}, "task server: meta"),  # the job's meta is in every task's environment
])
def test_what_a_task_runs_with_is_destructive(change: dict[str, object], reason: str) -> None:
    update = group_update(job(), job(**change), "app")
    assert (update.kind, update.reason) == ("destructive", reason)


def test_a_group_gone_is_destructive() -> None:
    assert group_update(job(), job(), "other").kind == "destructive"
