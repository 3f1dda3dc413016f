"""``--var-file``: variable values from .hcl and .json files, as Nomad reads them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from herder.errors import JobError
from herder.jobspec import load_job
from herder.jobspec.formats import read_var_file

JOB = """
variable "n" {
  type = number
}
variable "tags" {
  type    = list(string)
  default = []
}
variable "name" {
  type    = string
  default = "default"
}
job "j" {
  group "g" {
    count = var.n
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = var.tags
      }
      env {
        NAME = var.name
      }
    }
  }
}
"""


def test_hcl_and_json_var_files_give_typed_values(tmp_path: Path) -> None:
    (tmp_path / "vars.hcl").write_text('n = 3\ntags = ["a", "b"]\nname = "from-file"\n')
    (tmp_path / "vars.json").write_text('{"n": 4}')
    assert read_var_file(tmp_path / "vars.hcl") == {"n": "3", "tags": '["a", "b"]', "name": "from-file"}
    job_file = tmp_path / "job.hcl"
    job_file.write_text(JOB)
    given = read_var_file(tmp_path / "vars.hcl") | read_var_file(tmp_path / "vars.json")
    job = load_job(job_file, given)
    assert job.groups[0].count == 4
    assert job.groups[0].tasks[0].config["args"] == ["a", "b"]
    assert job.groups[0].tasks[0].env == {"NAME": "from-file"}


@pytest.mark.parametrize(("name", "text", "message"), [
    ("vars.txt", "n = 1", "unknown variable file format '.txt'"),
    ("vars.json", "[1]", "holds NAME = VALUE assignments only"),
    ("vars.hcl", 'job "x" {}', "holds NAME = VALUE assignments only"),
    ("vars.hcl", "n = ", "syntax error"),
])
def test_bad_var_files_are_reported_by_name(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(JobError) as caught:
        read_var_file(tmp_path / name)
    assert message in str(caught.value) and str(tmp_path / name) in str(caught.value)


def test_the_cli_takes_var_files_in_order_and_var_last(tmp_path: Path) -> None:
    (tmp_path / "job.hcl").write_text(JOB)
    (tmp_path / "a.hcl").write_text('n = 1\nname = "a"\n')
    (tmp_path / "b.json").write_text('{"n": 2}')
    argv = [sys.executable, "-m", "herder", "validate", "--data-dir", str(tmp_path / "data"),
            "--var-file", str(tmp_path / "a.hcl"), "--var-file", str(tmp_path / "b.json"), "--var", "name=cli",
            str(tmp_path / "job.hcl")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    missing = subprocess.run([*argv[:4], "--data-dir", str(tmp_path / "data"), str(tmp_path / "job.hcl")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "variable 'n' has no value" in missing.stderr
