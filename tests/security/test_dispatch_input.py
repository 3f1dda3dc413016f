"""A dispatcher's meta and a job author's payload file are data (SPEC §14, §15).

A parameterized job is dispatched by whoever may call the agent, with meta
values and a payload of their choosing; the job's author names the file the
payload is written to. Each test is an attack through one of them: meta that
would be evaluated as an expression when the child job is loaded again, and a
payload file outside the task's ``local/`` directory. The job layer refuses
or neutralises each before anything runs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from herder.errors import JobError
from herder.jobspec import evaluate_job_text, load_job_text
from herder.jobspec.dispatch import dispatch_child

PARENT = """
job "convert" {
  type = "batch"
  parameterized {
    meta_optional = ["input"]
  }
  task "t" {
    driver = "raw_exec"
    config { command = "/bin/true" }
    %s
  }
}
"""


@pytest.mark.parametrize("value", [
    '%{ for x in ["evaluated"] }${x}%{ endfor }',
    "${upper(\"evaluated\")}",
    "$${NOMAD_TASK_DIR}",
])
def test_dispatch_meta_is_never_evaluated(value: str) -> None:
    """The child's stored document loads again with the meta exactly as the dispatcher gave it."""
    document = evaluate_job_text(PARENT % "", "hcl", "convert.hcl")[1]
    child = dispatch_child(document, {"input": value}, b"", datetime.now(UTC))
    assert child.job.meta["input"] == value
    stored = load_job_text(json.dumps(child.document), "json", child.job.name)
    assert stored.meta["input"] == value


@pytest.mark.parametrize("file", ["../../alloc/data/x", "../secrets/token", "/etc/cron.d/owned",
                                  "a/../../../x", "sub/../../local/../../x"])
def test_a_payload_file_outside_local_is_refused(file: str) -> None:
    with pytest.raises(JobError) as caught:
        load_job_text(PARENT % f'dispatch_payload {{ file = "{file}" }}', "hcl", "convert.hcl")
    assert any("dispatch_payload.file" in error and "local/" in error for error in caught.value.errors)


def test_a_payload_file_inside_local_is_fine() -> None:
    job = load_job_text(PARENT % 'dispatch_payload { file = "in/data.json" }', "hcl", "convert.hcl")
    assert job.groups[0].tasks[0].dispatch_payload == "in/data.json"
