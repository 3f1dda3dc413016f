"""The evaluated canonical document (what ``herder job run`` submits), and YAML's bounded aliases."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from herder.errors import JobError
from herder.jobspec import JobFiles, evaluate_job_text, load_job_text


def test_the_evaluated_document_rebuilds_the_same_job_without_variables_or_files(tmp_path: Path) -> None:
    (tmp_path / "script.sh").write_text('echo "${var.not_evaluated_again}" %{ if x }\n')
    text = textwrap.dedent("""
        variable "n" {
          type    = number
          default = 1
        }
        locals {
          name = "web-${var.n}"
        }
        job "web" {
          group "app" {
            count = var.n
            task "t" {
              driver = "raw_exec"
              config {
                command = "/bin/sh"
                args    = ["-c", file("script.sh"), "$${NOMAD_PORT_http}", "${NOMAD_TASK_NAME}", "%%{ x }"]
              }
              meta { name = local.name }
            }
          }
        }
    """)
    job, document = evaluate_job_text(text, "hcl", "web.hcl", {"n": "2"}, JobFiles(tmp_path))
    assert set(document) == {"job"}
    again = load_job_text(json.dumps(document), "json", "web.hcl")
    assert again == job
    task = again.groups[0].tasks[0]
    assert again.groups[0].count == 2 and task.meta == {"name": "web-2"}
    assert task.config["args"] == ["-c", 'echo "${var.not_evaluated_again}" %{ if x }\n', "${NOMAD_PORT_http}",
                                   "${NOMAD_TASK_NAME}", "%{ x }"]


def test_a_literal_interpolation_keeps_its_quotes_through_the_evaluated_document() -> None:
    """``$${`` escapes the ``${`` only: the quotes and backslashes after it are string escapes as anywhere."""
    text = r'''
        job "web" {
          meta {
            a = "$${upper(\"x\")} %%{ if \"b\" } \\d"
          }
          task "t" { driver = "raw_exec" }
        }
    '''
    job, document = evaluate_job_text(textwrap.dedent(text), "hcl", "web.hcl")
    assert job.meta == {"a": '${upper("x")} %{ if "b" } \\d'}
    assert load_job_text(json.dumps(document), "json", "web.hcl") == job


SHARED = """
job:
  name: web
  groups:
    - name: g
      tasks:
        - &task {name: a, driver: raw_exec, config: {command: /bin/true}, meta: {X: &x shared}}
        - {<<: *task, name: b, meta: {X: *x}}
"""


def test_yaml_aliases_that_share_a_block_are_fine() -> None:
    job = load_job_text(SHARED, "yaml", "job.yaml")
    assert [task.driver for task in job.groups[0].tasks] == ["raw_exec", "raw_exec"]


@pytest.mark.parametrize(("text", "message"), [
    ("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + n)}: &{chr(98 + n)} [{', '.join([f'*{chr(97 + n)}'] * 10)}]\n" for n in range(4)) + "job: *e\n",
     "job.yaml: YAML aliases expand the document by more than 10000 nodes"),
    ("job: &a {name: x, meta: *a}\n", "job.yaml: invalid YAML: an alias refers to a node that contains it"),
])
def test_yaml_aliases_are_bounded(text: str, message: str) -> None:
    with pytest.raises(JobError) as caught:
        load_job_text(text, "yaml", "job.yaml")
    assert caught.value.errors[0].startswith(message), caught.value.errors
