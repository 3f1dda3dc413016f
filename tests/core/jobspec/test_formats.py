"""Reading job files in each format, and what happens to bad input."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from herder.errors import JobError
from herder.jobspec import load_job, load_job_text

VALID = Path(__file__).parent / "valid"


@pytest.mark.parametrize("name", sorted(path.name for path in VALID.iterdir()))
def test_every_valid_example_loads(name: str) -> None:
    job = load_job(VALID / name)
    assert job.groups and all(group.tasks for group in job.groups)


def test_the_three_formats_give_equal_jobs() -> None:
    from_hcl, from_json, from_yaml = (load_job(VALID / f"web.{ext}") for ext in ("hcl", "json", "yaml"))
    assert from_hcl == from_json == from_yaml
    assert from_hcl.source.endswith("web.hcl")


@pytest.mark.parametrize(
    ("suffix", "source"),
    [(".hcl", "web.hcl"), (".nomad", "web.hcl"), (".json", "web.json"), (".yaml", "web.yaml"), (".YML", "web.yaml")],
)
def test_format_follows_the_extension(tmp_path: Path, suffix: str, source: str) -> None:
    target = tmp_path / f"job{suffix}"
    target.write_bytes((VALID / source).read_bytes())
    assert load_job(target).name == "web"


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    target = tmp_path / "job.yaml"
    target.write_bytes(b"\xef\xbb\xbf" + (VALID / "web.yaml").read_bytes())
    assert load_job(target).name == "web"


def _error(path: Path) -> str:
    with pytest.raises(JobError) as caught:
        load_job(path)
    return str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read" in _error(tmp_path / "absent.hcl")


def test_directory(tmp_path: Path) -> None:
    directory = tmp_path / "job.hcl"
    directory.mkdir()
    assert "cannot read" in _error(directory)


def test_unknown_extension(tmp_path: Path) -> None:
    target = tmp_path / "job.txt"
    target.write_text("job {}")
    assert "unknown job file format '.txt'" in _error(target)


def test_non_utf8_file(tmp_path: Path) -> None:
    target = tmp_path / "job.yaml"
    target.write_bytes(b"job:\n  name: caf\xe9\n")
    assert "not UTF-8" in _error(target)


@pytest.mark.parametrize(
    ("text", "fmt", "expected"),
    [
        ("", "json", "empty"),
        ("   \n", "yaml", "empty"),
        ("# only a comment\n", "hcl", "empty"),
        ("[1, 2]", "json", "not a list"),
        ('"job"', "json", "not a string"),
        ("42", "yaml", "not a number"),
        ("a: 1\n---\nb: 2\n", "yaml", "invalid YAML"),
        ("job: {name: web, groups: [1, 2]}", "yaml", "job.groups[0]: must be a map"),
        ("job: 7", "yaml", "job: must be a map"),
        ('{"job": {"name": "web", "groups": [{"name": "a", "tasks": [[]]}]}}', "json", "tasks[0]: must be a map"),
        ("job: {name: web, meta: {when: 2024-01-01}, groups: []}", "yaml", "job.meta.when"),
        ("job: {name: web, groups: [{name: a, tasks: [{name: t, driver: d, env: {1: x}}]}]}", "yaml", None),
        ("9" * 5000, "json", "invalid JSON"),
        ("a: " + "9" * 5000, "yaml", "invalid YAML"),
        ("[" * 100_000, "json", None),
        ("[" * 100_000, "yaml", None),
        ("a = " + "[" * 5000 + "]" * 5000, "hcl", None),
        ('job "x" { group "a" { task "t" { driver = [1] } } }', "hcl", "driver: must be a string"),
        ("job {}", "hcl", "job.name: is required"),
        ('job "a" {\n  groups = 1\n  group "g" {}\n}', "hcl", "job.hcl:3: job.groups: is set twice"),
        ('job "a" {\n  groups = 1\n  task "t" {}\n}', "hcl", "job.hcl:3: job.groups: is set twice"),
        ('job "a" {\n  task "t" {\n    services = 5\n    service {}\n  }\n}', "hcl", "services: is set twice"),
        ('variables = 5\nvariable "x" {}\njob "a" {}', "hcl", "job.hcl:1: variables: is set twice"),
        ('variable "x" {}\nvariables = 5\njob "a" {}', "hcl", "job.hcl:2: variables: is set twice"),
        ('job "a" {}\njob = 1', "hcl", "job.hcl:2: job: is set twice"),
        ('locals {\n  a = 1\n}\nlocals {\n  a = 2\n}\njob "a" {}', "hcl", "job.hcl:5: locals.a: is set twice"),
        ('job "a" {\n  config = 1\n  config {}\n}', "hcl", "job.hcl:3: job.config: is set twice"),
        ('job "a" "b" {}', "hcl", "takes one label"),
        ('variable { default = 1 }\njob "a" {}', "hcl", "takes exactly one label"),
    ],
)
def test_bad_input_is_a_job_error(text: str, fmt: str, expected: str | None) -> None:
    try:
        load_job_text(text, fmt, f"job.{fmt}")
    except JobError as exc:
        message = str(exc)
        assert "Traceback" not in message
        if expected is not None:
            assert expected in message
    else:
        assert expected is None


@pytest.mark.parametrize("name", ["web.hcl", "web.json", "web.yaml", "nomad-init.nomad", "lone-task.hcl"])
def test_damaged_files_give_job_errors_only(name: str) -> None:
    """Truncations and random edits of valid files load or fail with JobError, nothing else."""
    text = (VALID / name).read_text()
    fmt = {"json": "json", "yaml": "yaml"}.get(name.rsplit(".", 1)[1], "hcl")
    rng = random.Random(name)
    variants = [text[:cut] for cut in range(0, len(text), max(1, len(text) // 40))]
    for _ in range(60):
        chars = list(text)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(len(chars))
            chars[position] = rng.choice(['"', "{", "}", "[", "]", "=", ":", "\n", "-", "0", "x", "$", "\\", " "])
        variants.append("".join(chars))
    for variant in variants:
        try:
            load_job_text(variant, fmt, name)
        except JobError as exc:
            assert exc.errors and all(isinstance(error, str) for error in exc.errors)
