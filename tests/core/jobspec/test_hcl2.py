"""HCL2 as Nomad 1.x writes it: locals, typed and validated variables, functions, heredocs, expressions."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path
from typing import Any

import pytest

from herder.errors import JobError
from herder.jobspec import load_job

from .helpers import load, problems, task_hcl


def meta_of(expression: str, prelude: str = "", variables: dict[str, str] | None = None) -> Any:
    """The value of ``expression`` as the job's meta ``x`` (meta keeps strings only, so it goes through config)."""
    job = load(f"""
{prelude}
job "web" {{
  task "t" {{
    driver = "raw_exec"
    config {{
      x = {expression}
    }}
  }}
}}
""", variables=variables)
    return job.groups[0].tasks[0].config["x"]


@pytest.mark.parametrize(("expression", "expected"), [
    ('format("%s-%d", "web", 3)', "web-3"),
    ('format("%05.1f|%-4s|%q|%v|%%", 3.14159, "ab", "q", true)', '003.1|ab  |"q"|true|%'),
    ('join(",", ["a", "b"], ["c"])', "a,b,c"),
    ('split(",", "a,b,c")', ["a", "b", "c"]),
    ('lower("ABC")', "abc"),
    ('upper("abc")', "ABC"),
    ('concat(["a"], [], ["b", "c"])', ["a", "b", "c"]),
    ("merge({a = 1, b = 2}, {b = 3})", {"a": 1, "b": 3}),
    ('lookup({a = "x"}, "a", "d")', "x"),
    ('lookup({a = "x"}, "b", "d")', "d"),
    ('jsonencode({a = [1, "b", null], c = true})', '{"a":[1,"b",null],"c":true}'),
    ('try(lookup({}, "a"), "fallback")', "fallback"),
    ('coalesce("", null, "x", "y")', "x"),
    ('trimspace("  a b \\n")', "a b"),
    ('replace("a-b-c", "-", "_")', "a_b_c"),
    ('replace("a1b22", "/[0-9]+/", "#")', "a#b#"),
    ('replace("a1b22", "/([a-z])(?P<digit>\\\\d)/", "${digit}$1$$")', "1a$2b$2"),
    ('replace("aaaa!", "/(a+)+$/", "")', "aaaa!"),
    ('regex("([a-z]+)-(\\\\d+)", "web-42")', ["web", "42"]),
    ('regex("(?P<name>[a-z]+)-(?P<n>\\\\d+)", "web-42")', {"name": "web", "n": "42"}),
    ('regex("\\\\d+", "web-42")', "42"),
    ('regexall("\\\\d", "a1b2")', ["1", "2"]),
    ('regexall("x", "a1b2")', []),
    ('length(["a", "b"])', 2),
    ('length({a = 1})', 1),
    ("tostring(5)", "5"),
    ('tonumber("42")', 42),
    ("min(3, 1, 2)", 1),
    ("max(3, 1.5)", 3),
    ("keys({b = 1, a = 2})", ["a", "b"]),
    ("values({b = 1, a = 2})", [2, 1]),
    ('element(["a", "b"], 3)', "b"),
    ('contains(["a", "b"], "b")', True),
    ('[for s in ["a", "b"] : upper(s)]', ["A", "B"]),
    ('{for k, v in {a = 1} : v => k}', {"1": "a"}),
    ("1 + 2 * 3 - 4 / 2", 5),
    ("7 % 3 == 1 && !false", True),
    ('3 >= 2 ? "yes" : "no"', "yes"),
    ("-(2 + 1)", -3),
])
def test_functions_and_operators(expression: str, expected: Any) -> None:
    assert meta_of(expression) == expected


@pytest.mark.parametrize(("expression", "message"), [
    ('regex("(a)\\\\1", "aa")', "regex(): invalid regular expression '(a)\\\\1': invalid escape sequence"),
    ('replace("ab", "/(?=a)/", "")', "replace(): invalid regular expression '(?=a)': invalid perl operator"),
    ('regex("b", "aa")', "regex(): the pattern did not match any part of the string"),
    ('regex("(?P<x>a)(b)", "ab")', "regex(): a pattern cannot mix named and unnamed capture groups"),
    ('format("%10001s", "a")', "format(): width 10001 is over the limit of 10000"),
    ('format("%.10001f", 1)', "format(): precision 10001 is over the limit of 10000"),
    # 25 replacements of 1024 * 42 characters: just over 1 MiB
    (f'replace("{"a" * 25}", "a", join("", [for i in range(1024) : "{"x" * 42}"]))',
     "replace(): the result would be longer than 1048576 characters"),
    (f'replace("{"a" * 25}", "/a/", join("", [for i in range(1024) : "{"x" * 42}"]))',
     "replace(): the result would be longer than 1048576 characters"),
    ('jsonencode([for i in range(64) : join("", [for j in range(1024) : "xxxxxxxxxxxxxxxxxxxx"])])',
     "jsonencode(): the result would be longer than 1048576 characters"),
    ('try(length([for a in range(1024) : [for b in range(1024) : [for c in range(1024) : c]]]), 0)',
     "the job's expressions take more than 1000000 steps to evaluate"),
])
def test_functions_are_bounded(expression: str, message: str) -> None:
    [error] = problems(f'job "web" {{\n task "t" {{\n  driver = "raw_exec"\n  config {{ x = {expression} }}\n }}\n}}\n')
    assert message in error, error


def test_locals_chain_across_blocks_and_refer_to_variables() -> None:
    prelude = """
variable "env" {
  type    = string
  default = "Prod"
}
locals {
  name = "web-${lower(var.env)}"
}
locals {
  full  = "${local.name}.${local.domain}"
  domain = "example.com"
  tags  = concat([local.name], ["x"])
}
"""
    assert meta_of("local.full", prelude) == "web-prod.example.com"
    assert meta_of("local.tags", prelude) == ["web-prod", "x"]
    assert meta_of("local.full", prelude, {"env": "DEV"}) == "web-dev.example.com"


def test_bare_expressions_keep_their_types() -> None:
    job = load("""
variable "n" {
  type    = number
  default = 2
}
locals {
  base = ["a"]
}
job "web" {
  datacenters = concat(local.base, ["b"])
  group "g" {
    count = var.n * 2
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/echo"
        args    = concat(local.base, ["x"])
      }
    }
  }
}
""")
    assert job.datacenters == ["a", "b"]
    assert job.groups[0].count == 4
    assert job.groups[0].tasks[0].config["args"] == ["a", "x"]


def test_runtime_references_are_left_as_written() -> None:
    job = load("""
variable "v" { default = "1" }
job "web" {
  task "t" {
    driver = "raw_exec"
    config {
      command = "/bin/echo"
      args    = ["${NOMAD_PORT_http}", "${attr.kernel.name}-${var.v}", "${node.unique.name}", "${meta.team}",
                 "${env.HOME}", "$${var.v}", "${NOMAD_META_a}/${upper("x")}"]
    }
  }
}
""")
    assert job.groups[0].tasks[0].config["args"] == [
        "${NOMAD_PORT_http}", "${attr.kernel.name}-1", "${node.unique.name}", "${meta.team}",
        "${env.HOME}", "${var.v}", "${NOMAD_META_a}/X",
    ]


def test_heredocs_keep_quotes_and_strip_indentation() -> None:
    job = load("""
variable "port" { default = 8080 }
job "web" {
  task "t" {
    driver = "raw_exec"
    template {
      data        = <<EOH
{{ env "NOMAD_ADDR_http" }} "quoted" \\n
port=${var.port} alloc=${NOMAD_ALLOC_ID}
EOH
      destination = "local/a"
    }
    template {
      data        = <<-EOH
        {{ key "x" }} say "hi"
          indented
        EOH
      destination = "local/b"
    }
    config {
      args = [upper(<<-EOT
        a "b"
        EOT
      )]
    }
  }
}
""")
    task = job.groups[0].tasks[0]
    assert task.templates[0].data == '{{ env "NOMAD_ADDR_http" }} "quoted" \\n\nport=8080 alloc=${NOMAD_ALLOC_ID}\n'
    assert task.templates[1].data == '{{ key "x" }} say "hi"\n  indented\n'
    assert task.config["args"] == ['A "B"\n']


def test_file_reads_relative_to_the_job_file_inside_its_directory(tmp_path: Path) -> None:
    (tmp_path / "jobs" / "conf").mkdir(parents=True)
    (tmp_path / "jobs" / "conf" / "app.conf").write_text('listen "0.0.0.0"\n')
    (tmp_path / "outside.conf").write_text("outside\n")
    job_file = tmp_path / "jobs" / "web.hcl"

    def load_with(path: str, allow_file_outside: bool = False) -> str:
        job_file.write_text(textwrap.dedent(f"""
            job "web" {{
              task "t" {{
                driver = "raw_exec"
                config {{ conf = file("{path}") }}
              }}
            }}
        """))
        return str(load_job(job_file, allow_file_outside=allow_file_outside).groups[0].tasks[0].config["conf"])

    assert load_with("conf/app.conf") == 'listen "0.0.0.0"\n'
    assert load_with("./conf/../conf/app.conf") == 'listen "0.0.0.0"\n'
    with pytest.raises(JobError) as caught:
        load_with("missing.conf")
    assert caught.value.errors == [
        f"{job_file}:5: job.groups[0].tasks[0].config.conf: file(): no such file {tmp_path / 'jobs' / 'missing.conf'}"
    ]
    for outside in ("../outside.conf", str(tmp_path / "outside.conf"), "conf/../../outside.conf"):
        with pytest.raises(JobError) as caught:
            load_with(outside)
        assert "is outside the job file's directory" in caught.value.errors[0]
        assert "--allow-file-outside" in caught.value.errors[0]
    assert load_with("../outside.conf", allow_file_outside=True) == "outside\n"


def test_file_follows_no_link_and_reads_regular_files_of_bounded_size(tmp_path: Path) -> None:
    (tmp_path / "outside.conf").write_text("outside\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "link.conf").symlink_to(tmp_path / "outside.conf")
    (tmp_path / "jobs" / "dir").symlink_to(tmp_path)
    (tmp_path / "jobs" / "big.conf").write_bytes(b"x" * ((1 << 20) + 1))
    os.mkfifo(tmp_path / "jobs" / "fifo")
    job_file = tmp_path / "jobs" / "web.hcl"
    expected = {
        "link.conf": f"{tmp_path / 'jobs' / 'link.conf'} is a symbolic link",
        "dir/outside.conf": f"{tmp_path / 'jobs' / 'dir'} is a symbolic link",
        "big.conf": f"{tmp_path / 'jobs' / 'big.conf'} is larger than 1048576 bytes",
        "fifo": f"{tmp_path / 'jobs' / 'fifo'} is not a regular file",
    }
    for path, message in expected.items():
        job_file.write_text(f'job "web" {{\n task "t" {{\n  driver = "raw_exec"\n  config {{ conf = file("{path}") }}'
                            "\n }\n}\n")
        with pytest.raises(JobError) as caught:
            load_job(job_file)
        assert message in caught.value.errors[0]
    job_file.write_text(job_file.read_text().replace("fifo", "link.conf"))
    assert load_job(job_file, allow_file_outside=True).groups[0].tasks[0].config["conf"] == "outside\n"


def test_file_is_refused_in_text_that_comes_from_no_file() -> None:
    assert problems(task_hcl('config { conf = file("/etc/hostname") }')) == [
        "job.hcl:7: job.groups[0].tasks[0].config.conf: file() is not available to jobs submitted to the agent: "
        "use `herder job run`, which reads files on your side"]


VALIDATED = """
variable "port" {
  type        = number
  default     = 8080
  description = "the port to listen on"
  sensitive   = false
  validation {
    condition     = var.port > 1024
    error_message = "The port must be above 1024."
  }
  validation {
    condition     = var.port < 65536
    error_message = "The port must be a port number."
  }
}
variable "regions" {
  type    = list(string)
  default = ["eu"]
}
variable "limits" {
  type    = object({ cpu = number, memory = number })
  default = { cpu = 100, memory = "256" }
}
job "web" {
  datacenters = var.regions
  task "t" {
    driver = "raw_exec"
    config { args = ["--port=${var.port}"] }
    resources {
      cpu    = var.limits.cpu
      memory = var.limits["memory"]
    }
  }
}
"""


def test_variable_types_defaults_and_validation() -> None:
    job = load(VALIDATED)
    task = job.groups[0].tasks[0]
    assert (job.datacenters, task.config["args"], task.resources.memory) == (["eu"], ["--port=8080"], 256)
    assert problems(VALIDATED, variables={"port": "80"}) == ["job.hcl:2: variables.port: The port must be above 1024."]
    assert problems(VALIDATED, variables={"port": "70000"}) == [
        "job.hcl:2: variables.port: The port must be a port number."
    ]
    assert load(VALIDATED, variables={"regions": '["a", "b"]'}).datacenters == ["a", "b"]


@pytest.mark.parametrize(("prelude", "expression", "expected"), [
    ("", "nosuch(1)", "job.hcl:7: job.groups[0].tasks[0].config.x: unknown function 'nosuch'"),
    ("", "local.missing", "config.x: local 'missing' is not defined"),
    ("", "var.missing", "config.x: variable 'missing' is not declared"),
    ('variable "n" {\n  type = number\n  default = "ten"\n}', "var.n",
     "job.hcl:4: variables.n.default: the default 'ten' does not match the type: a string ('ten') is not a number"),
    ('variable "n" {\n  type = list(string)\n  default = "a"\n}', "var.n", "a string is not a list"),
    ("locals {\n  a = local.b\n  b = local.a\n}", "local.a", "job.hcl:4: locals.b: local 'a' refers to itself"),
    ("locals {\n  a = upper()\n}", "local.a", "job.hcl:3: locals.a: upper(): wrong number of arguments (0)"),
    ("", '"${upper(NOMAD_X)}"', "unknown name 'NOMAD_X'"),
    ("", '"x-${[1]}"', "[1] is a list and cannot be part of a string"),
    ("", 'lookup({}, "k")', "lookup(): no key 'k' and no default"),
    ("", '1 + "a"', "is not a number"),
])
def test_expression_errors_are_named(prelude: str, expression: str, expected: str) -> None:
    with pytest.raises(JobError) as caught:
        meta_of(expression, prelude)
    errors = caught.value.errors
    assert any(expected in error for error in errors), errors
    assert not any("Traceback" in error for error in errors)


def test_templates_in_yaml_files_are_evaluated_too() -> None:
    job = load("""
        variables:
          n: {type: number, default: 3}
        locals:
          name: '${format("w-%d", var.n)}'
        job:
          name: web
          groups:
            - name: app
              count: ${var.n - 1}
              tasks:
                - name: t
                  driver: raw_exec
                  env: {NAME: "${local.name}", PORT: "${NOMAD_PORT_http}"}
    """, "yaml")
    assert job.groups[0].count == 2
    assert job.groups[0].tasks[0].env == {"NAME": "w-3", "PORT": "${NOMAD_PORT_http}"}
