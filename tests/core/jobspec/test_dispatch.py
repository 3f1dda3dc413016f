"""Children of periodic and parameterized jobs: their names, parents, meta and payload, and the refusals."""

from __future__ import annotations

import base64
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from herder.errors import DispatchError
from herder.jobspec import evaluate_job_text, load_job_text
from herder.jobspec.dispatch import dispatch_child, dispatch_problems, next_launch_time, periodic_child
from herder.model import MAX_PAYLOAD, Parameterized, Periodic

CORPUS = Path(__file__).parent / "corpus"
NOW = datetime(2024, 5, 17, 12, 30, 15, tzinfo=UTC)


def document_of(path: Path) -> dict[str, Any]:
    """The canonical document the agent stores for the job file at ``path``."""
    return evaluate_job_text(path.read_text(), "hcl", str(path))[1]


def hcl_document(text: str) -> dict[str, Any]:
    return evaluate_job_text(text, "hcl", "job.hcl")[1]


NIGHTLY = document_of(CORPUS / "batch-periodic.nomad.hcl")
ENCODE = document_of(CORPUS / "parameterized-dispatch.nomad.hcl")


def test_a_periodic_launch_is_the_job_named_for_its_time_without_its_schedule() -> None:
    child = periodic_child(NIGHTLY, NOW)
    assert child.job.name == "nightly-report/periodic-1715949015"
    assert child.job.parent_id == "nightly-report"
    assert child.job.periodic is None and child.job.runs_itself
    assert [task.name for group in child.job.groups for task in group.tasks] == ["generate"]
    assert child.job.type == "batch" and child.job.warnings == []  # not "does not schedule periodic jobs yet"
    # What the agent stores loads as the same job.
    assert load_job_text(json.dumps(child.document), "json") == child.job
    assert "periodic" in NIGHTLY["job"]  # the parent's document is left as it was


def test_runtime_references_survive_into_the_child() -> None:
    child = periodic_child(NIGHTLY, NOW)
    args = child.job.groups[0].tasks[0].config["args"]
    assert "${NOMAD_JOB_ID}" in args[1] and "${NOMAD_ALLOC_DIR}" in args[1]


@pytest.mark.parametrize(("text", "why"), [
    ('job "x" {\n type = "batch"\n task "t" { driver = "raw_exec" }\n}', "'x' is not periodic"),
    ('job "x" {\n type = "batch"\n periodic {\n cron = "@daily"\n enabled = false\n }\n'
     ' task "t" { driver = "raw_exec" }\n}', "'x' has its periodic launches disabled"),
    ('job "x" {\n type = "batch"\n periodic { cron = "@daily" }\n parameterized {}\n'
     ' task "t" { driver = "raw_exec" }\n}', "'x' is parameterized: its dispatched children are the periodic ones"),
])
def test_only_a_job_that_launches_has_launches(text: str, why: str) -> None:
    with pytest.raises(DispatchError) as caught:
        periodic_child(hcl_document(text), NOW)
    assert caught.value.errors == [f"job {why}"]


def test_a_dispatch_has_meta_and_payload() -> None:
    payload = b'{"preset": "fast"}\n'
    child = dispatch_child(ENCODE, {"input": "/data/in.mp4", "profile": "${not.a.reference}"}, payload, NOW)
    assert re.fullmatch(r"video-encode/dispatch-1715949015-[0-9a-f]{8}", child.job.name)
    assert child.job.parent_id == "video-encode"
    assert child.job.parameterized is None and child.job.runs_itself
    # Merged over the job's meta; the dispatcher's values are taken as they are, never evaluated.
    assert child.job.meta == {"profile": "${not.a.reference}", "input": "/data/in.mp4"}
    assert child.job.payload == payload
    assert child.document["job"]["payload"] == base64.b64encode(payload).decode()
    assert child.job.groups[0].tasks[0].dispatch_payload == "config.json"
    assert load_job_text(json.dumps(child.document), "json") == child.job


def test_each_dispatch_has_its_own_name() -> None:
    names = {dispatch_child(ENCODE, {"input": "x"}, b"p", NOW).job.name for _ in range(20)}
    assert len(names) == 20


def test_the_job_meta_stays_when_the_dispatch_gives_none() -> None:
    child = dispatch_child(ENCODE, {"input": "x"}, b"p", NOW)
    assert child.job.meta == {"profile": "small", "input": "x"}


REQUIRED = Parameterized(payload="required", meta_required=("input",), meta_optional=("profile",))


@pytest.mark.parametrize(("parameterized", "meta", "payload", "expected"), [
    (REQUIRED, {"input": "x"}, b"", ["the job requires a payload and none was given"]),
    (Parameterized(payload="forbidden"), {}, b"abc", ["the job forbids a payload and one of 3 bytes was given"]),
    (REQUIRED, {"input": "x"}, b"x" * (MAX_PAYLOAD + 1),
     [f"the payload is {MAX_PAYLOAD + 1} bytes, more than the 16384 (16 KiB) allowed"]),
    (REQUIRED, {"input": "x", "colour": "red", "size": "9"}, b"p",
     ["meta 'colour', 'size' not declared by the job (meta_required: 'input'; meta_optional: 'profile')"]),
    (Parameterized(), {"x": "1"}, b"", ["meta 'x' not declared by the job (meta_required: none; meta_optional: none)"]),
    (REQUIRED, {"profile": "fast"}, b"p", ["missing required meta 'input'"]),
    (REQUIRED, {}, b"", ["the job requires a payload and none was given", "missing required meta 'input'"]),
])
def test_a_dispatch_the_job_does_not_allow_is_refused_naming_why(
        parameterized: Parameterized, meta: dict[str, str], payload: bytes, expected: list[str]) -> None:
    assert dispatch_problems(parameterized, meta, payload) == expected


def test_a_payload_of_exactly_16_kib_and_optional_things_left_out_are_fine() -> None:
    assert dispatch_problems(REQUIRED, {"input": "x"}, b"x" * MAX_PAYLOAD) == []
    assert dispatch_problems(Parameterized(), {}, b"") == []


def test_a_refused_dispatch_makes_nothing_and_says_which_job() -> None:
    with pytest.raises(DispatchError) as caught:
        dispatch_child(ENCODE, {"profile": "fast"}, b"", NOW)
    assert caught.value.errors == ["cannot dispatch job 'video-encode': the job requires a payload and none was given",
                                   "cannot dispatch job 'video-encode': missing required meta 'input'"]


def test_a_job_that_is_not_parameterized_is_not_dispatched() -> None:
    with pytest.raises(DispatchError) as caught:
        dispatch_child(NIGHTLY, {}, b"", NOW)
    assert caught.value.errors == ["job 'nightly-report' is not parameterized"]


def test_a_dispatched_child_of_a_periodic_parameterized_job_launches_and_passes_on_its_payload() -> None:
    parent = hcl_document("""
        job "backup" {
          type = "batch"
          periodic { cron = "0 * * * *" }
          parameterized { meta_required = ["target"] }
          task "t" {
            driver = "raw_exec"
            dispatch_payload { file = "in" }
          }
        }
    """)
    dispatched = dispatch_child(parent, {"target": "db"}, b"data", NOW)
    assert dispatched.job.launches and dispatched.job.periodic is not None
    launched = periodic_child(dispatched.document, datetime(2024, 5, 17, 13, tzinfo=UTC))
    assert launched.job.name == f"{dispatched.job.name}/periodic-1715950800"
    assert launched.job.parent_id == dispatched.job.name
    assert launched.job.payload == b"data" and launched.job.meta == {"target": "db"}


def test_the_next_launch_is_read_in_the_jobs_time_zone() -> None:
    berlin = Periodic(crons=("0 3 * * *",), time_zone="Europe/Berlin")
    found = next_launch_time(berlin, NOW)
    assert found == datetime(2024, 5, 18, 3, tzinfo=ZoneInfo("Europe/Berlin"))
    assert found is not None and found.astimezone(UTC).hour == 1  # CEST is UTC+2
    several = Periodic(crons=("0 3 * * *", "45 12 * * *"))
    assert next_launch_time(several, NOW) == datetime(2024, 5, 17, 12, 45, tzinfo=ZoneInfo("UTC"))
    assert next_launch_time(Periodic(crons=("* * * * * 2020",)), NOW) is None
