"""The ``periodic`` and ``parameterized`` blocks and the task's ``dispatch_payload``, as Nomad validates them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from herder.errors import JobError
from herder.jobspec import load_job, load_job_text
from herder.model import Parameterized, Periodic

from .helpers import load, problems

CORPUS = Path(__file__).parent / "corpus"


def batch(job: str = "", task: str = "", job_type: str = "batch") -> str:
    return f"""
job "report" {{
  type = "{job_type}"
  {job}
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
      {task}
    }}
  }}
}}
"""


def test_a_nightly_job_file_is_read_with_its_schedule() -> None:
    job = load_job(CORPUS / "batch-periodic.nomad.hcl")
    assert job.periodic == Periodic(crons=("0 3 * * *",), prohibit_overlap=True, time_zone="Europe/Berlin")
    assert not job.runs_itself and job.launches
    assert not any("periodic" in warning for warning in job.warnings)  # registered by the agent, not run


def test_a_dispatchable_job_file_is_read_with_its_parameters() -> None:
    job = load_job(CORPUS / "parameterized-dispatch.nomad.hcl")
    assert job.parameterized == Parameterized(payload="required", meta_required=("input",), meta_optional=("profile",))
    assert job.groups[0].tasks[0].dispatch_payload == "config.json"
    assert not job.runs_itself and not job.launches
    assert job.warnings == []  # it is registered and waits to be dispatched: nothing to warn of


def test_defaults_are_nomads() -> None:
    job = load(batch('periodic { cron = "@daily" }\n parameterized {}'))
    assert job.periodic == Periodic(crons=("@daily",), prohibit_overlap=False, time_zone="UTC", enabled=True)
    assert job.parameterized == Parameterized(payload="optional", meta_required=(), meta_optional=())
    assert not job.launches  # both: only its dispatched children launch
    assert load(batch()).periodic is None and load(batch()).runs_itself


def test_sysbatch_may_be_periodic_and_a_disabled_one_does_not_launch() -> None:
    job = load(batch('periodic {\n cron = "@daily"\n enabled = false\n }', job_type="sysbatch"))
    assert job.periodic is not None and not job.periodic.enabled
    assert not job.runs_itself and not job.launches


@pytest.mark.parametrize("job_type", ["service", "system"])
@pytest.mark.parametrize(("block", "what"), [('periodic { cron = "@daily" }', "periodic"),
                                             ("parameterized {}", "parameterized")])
def test_only_batch_jobs_may_be_periodic_or_parameterized(job_type: str, block: str, what: str) -> None:
    errors = problems(batch(block, job_type=job_type))
    assert errors == [f"job.hcl:4: job.{what}: only batch and sysbatch jobs may be {what} (this job is {job_type})"]


@pytest.mark.parametrize(("block", "expected"), [
    ('periodic { cron = "0 3 * *" }', "job.periodic.cron: '0 3 * *' has 4 field(s)"),
    ('periodic { cron = "0 25 * * *" }', "job.periodic.cron: syntax error in hour field: '25'"),
    ('periodic { crons = ["@daily", "* * * * MOON"] }',
     "job.periodic.crons[1]: syntax error in day-of-week field: 'MOON'"),
    ('periodic {\n cron = "@daily"\n crons = ["@hourly"]\n }', "job.periodic: give cron or crons, not both"),
    ("periodic { prohibit_overlap = true }", "job.periodic: needs cron or crons"),
    ('periodic {\n cron = "@daily"\n time_zone = "Mars/Olympus"\n }',
     "job.periodic.time_zone: unknown time zone 'Mars/Olympus' (an IANA name such as 'Europe/Berlin')"),
    ('periodic {\n cron = "@daily"\n time_zone = "../../etc/passwd"\n }', "unknown time zone '../../etc/passwd'"),
    ('periodic {\n cron = "@daily"\n colour = "x"\n }', "job.periodic.colour: unknown key 'colour'"),
    ('parameterized { payload = "maybe" }', "job.parameterized.payload: 'maybe' is not one of optional, required, "
                                            "forbidden"),
    ('parameterized {\n meta_required = ["a", "b"]\n meta_optional = ["b"]\n }',
     "job.parameterized.meta_optional: 'b' also in meta_required (a key is required or optional, not both)"),
])
def test_a_bad_block_is_a_job_error_naming_its_path(block: str, expected: str) -> None:
    errors = problems(batch(block))
    assert len(errors) == 1 and expected in errors[0], errors


@pytest.mark.parametrize(("file", "expected"), [
    ("/etc/passwd", "'/etc/passwd' must be relative to the task's local/ directory"),
    ("../secrets/x", "'../secrets/x' must stay inside the task's local/ directory (no '..')"),
    ("a/../../x", "'a/../../x' must stay inside the task's local/ directory (no '..')"),
    (".", "'.' must name a file"),
    ("dir/", "'dir/' must name a file"),
])
def test_a_payload_file_must_stay_in_local(file: str, expected: str) -> None:
    errors = problems(batch(task=f'dispatch_payload {{ file = "{file}" }}'))
    assert errors == [f"job.hcl:9: job.groups[0].tasks[0].dispatch_payload.file: {expected}"]


def test_a_payload_file_is_required() -> None:
    errors = problems(batch(task="dispatch_payload {}"))
    assert errors == ["job.hcl:9: job.groups[0].tasks[0].dispatch_payload.file: is required"]


def test_nomads_json_shape() -> None:
    """As ``nomad job run -output`` prints it: empty strings for the defaults, and SpecType."""
    document = {"Job": {
        "ID": "report", "Type": "batch",
        "Periodic": {"Enabled": True, "Spec": "", "Specs": ["0 3 * * *", "30 4 * * 1"], "SpecType": "cron",
                     "ProhibitOverlap": True, "TimeZone": ""},
        "ParameterizedJob": {"Payload": "", "MetaRequired": ["input"], "MetaOptional": None},
        "ParentID": "", "Dispatched": False, "Payload": None,
        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"},
                                               "DispatchPayload": {"File": "input.json"}}]}],
    }}
    job = load_job_text(json.dumps(document), "json")
    assert job.periodic == Periodic(crons=("0 3 * * *", "30 4 * * 1"), prohibit_overlap=True)
    assert job.parameterized == Parameterized(meta_required=("input",))
    assert job.groups[0].tasks[0].dispatch_payload == "input.json"
    assert job.parent_id == "" and job.payload == b""


def test_nomads_json_with_a_spec_type_herder_does_not_know() -> None:
    document = {"Job": {"ID": "x", "Type": "batch", "Periodic": {"Spec": "@daily", "SpecType": "_internal_test"},
                        "TaskGroups": [{"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec"}]}]}}
    with pytest.raises(JobError) as caught:
        load_job_text(json.dumps(document), "json")
    assert caught.value.errors == ["job.periodic.spec_type: unknown key 'spec_type'"]


def test_yaml_too() -> None:
    job = load("""
        job:
          name: report
          type: batch
          periodic: {crons: ["@hourly"], time_zone: America/New_York}
          groups: [{name: g, tasks: [{name: t, driver: raw_exec, dispatch_payload: {file: in}}]}]
    """, "yaml")
    assert job.periodic == Periodic(crons=("@hourly",), time_zone="America/New_York")


def test_a_child_name_is_a_job_name_but_only_in_its_shapes() -> None:
    assert load(batch().replace('"report"', '"report/periodic-1700000000"')).name == "report/periodic-1700000000"
    assert load(batch().replace('"report"', '"r/dispatch-1-0123abcd/periodic-2"')).name == \
        "r/dispatch-1-0123abcd/periodic-2"
    for name in ["report/x", "report/periodic-", "report/dispatch-1-XYZ", "/periodic-1"]:
        errors = problems(batch().replace('"report"', f'"{name}"'))
        assert any("job.name: must be 1-128 letters" in error for error in errors), (name, errors)
