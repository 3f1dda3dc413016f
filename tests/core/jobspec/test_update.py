"""The ``update`` block: a group's over its job's over Nomad's defaults, checked as Nomad checks it."""

from __future__ import annotations

from herder.jobspec.nomad_json import from_nomad
from herder.model import Update

from .helpers import load, problems

TASK = 'task "t" {\n driver = "raw_exec"\n config { command = "true" }\n }'


def test_a_service_job_without_update_gets_nomads_defaults() -> None:
    job = load(f'job "web" {{\n group "a" {{\n {TASK}\n }}\n}}')
    assert job.groups[0].update == Update(max_parallel=1, health_check="checks", min_healthy_time=10.0,
                                          healthy_deadline=300.0, progress_deadline=600.0, auto_revert=False,
                                          auto_promote=False, canary=0, stagger=30.0)
    assert job.warnings == []


def test_the_groups_block_wins_over_the_jobs() -> None:
    job = load(f"""
        job "web" {{
          update {{
            max_parallel     = 2
            min_healthy_time = "2s"
            auto_revert      = true
          }}
          group "a" {{
            update {{
              min_healthy_time = "1s"
              canary           = 1
              auto_promote     = true
            }}
            {TASK}
          }}
          group "b" {{
            {TASK}
          }}
        }}""")
    a, b = (group.update for group in job.groups)
    assert a is not None and b is not None
    assert (a.max_parallel, a.min_healthy_time, a.auto_revert, a.canary, a.auto_promote) == (2, 1.0, True, 1, True)
    assert (b.max_parallel, b.min_healthy_time, b.canary) == (2, 2.0, 0)


def test_batch_jobs_have_none_and_may_not_ask_for_one() -> None:
    assert load(f'job "b" {{\n type = "batch"\n group "a" {{\n {TASK}\n }}\n}}').groups[0].update is None
    found = problems(f'job "b" {{\n type = "batch"\n update {{ max_parallel = 2 }}\n group "a" {{\n {TASK}\n }}\n}}')
    assert any("a batch job has no update strategy" in problem for problem in found), found


def test_a_system_job_may_have_one_and_is_replaced_at_once() -> None:
    job = load(f'job "s" {{\n type = "system"\n update {{ max_parallel = 2 }}\n group "a" {{\n {TASK}\n }}\n}}')
    assert job.groups[0].update is None


def test_nomads_rules_are_checked() -> None:
    found = problems(f"""
        job "web" {{
          group "a" {{
            update {{
              min_healthy_time  = "30s"
              healthy_deadline  = "20s"
              progress_deadline = "10s"
              auto_promote      = true
              health_check      = "sometimes"
            }}
            {TASK}
          }}
        }}""")
    text = "\\n".join(found)
    assert "health_check" in text
    found = problems(f"""
        job "web" {{
          group "a" {{
            update {{
              min_healthy_time  = "30s"
              healthy_deadline  = "20s"
              progress_deadline = "10s"
              auto_promote      = true
            }}
            {TASK}
          }}
        }}""")
    text = "\\n".join(found)
    assert "min_healthy_time: must be less than healthy_deadline (20s)" in text, text
    assert "healthy_deadline: must be less than progress_deadline (10s)" in text, text
    assert "auto_promote: needs a canary count greater than zero" in text, text


def test_nomad_json_durations_are_nanoseconds_and_zeros_of_inspect_are_unset() -> None:
    document = from_nomad({"Job": {"ID": "web", "TaskGroups": [{"Name": "a", "Update": {
        "MaxParallel": 2, "MinHealthyTime": 1_000_000_000, "HealthCheck": "", "HealthyDeadline": 0,
        "Canary": None}}]}})
    assert document["job"]["groups"][0]["update"] == {"max_parallel": 2, "min_healthy_time": 1.0}
