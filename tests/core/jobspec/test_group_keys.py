"""``max_run_duration``, ``scaling``, ``consul``, ``identity`` and ``resources.cores``, read and checked
as Nomad's validation does; the HCL functions ``pathexpand`` and ``uuidv5`` as go-cty-funcs has them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from herder.jobspec import evaluate_job_text, load_job
from herder.jobspec.nomad_json import to_nomad
from herder.model import DEFAULT_IDENTITY, Identity, Scaling

from .helpers import load, problems, task_hcl


def group_job(group: str, *, type: str = "batch", task: str = "") -> str:
    return f"""
job "web" {{
  type = "{type}"
  group "app" {{
    {group}
    task "server" {{
      driver = "raw_exec"
      {task}
    }}
  }}
}}
"""


def test_max_run_duration_is_read_for_batch_jobs() -> None:
    assert load(group_job('max_run_duration = "90s"')).groups[0].max_run_duration == 90.0
    assert load(group_job("")).groups[0].max_run_duration == 0.0


def test_max_run_duration_is_refused_where_nomad_refuses_it() -> None:
    [error] = problems(group_job('max_run_duration = "1m"', type="service"))
    assert "job.groups[0].max_run_duration: a service job does not allow max_run_duration" in error
    [error] = problems(group_job('max_run_duration = "0s"'))
    assert "job.groups[0].max_run_duration: must be greater than zero" in error


def test_scaling_bounds_are_read_and_the_policy_kept_without_effect() -> None:
    group = load(group_job('count = 2\n scaling {\n min = 1\n max = 5\n enabled = false\n'
                           ' policy {\n cooldown = "1m"\n }\n }')).groups[0]
    assert group.scaling == Scaling(min=1, max=5, enabled=False, policy={"cooldown": "1m"})
    assert load(group_job("count = 3\n scaling {\n max = 4\n }")).groups[0].scaling == Scaling(min=3, max=4)
    unset = load(group_job("scaling {\n min = 2\n max = 4\n }")).groups[0]  # no count: the minimum, as Nomad
    assert (unset.count, unset.scaling) == (2, Scaling(min=2, max=4))


@pytest.mark.parametrize(("block", "message"), [
    ("count = 1\n scaling {\n min = 1\n }", 'job.groups[0].scaling: argument "max" is required'),
    ("count = 1\n scaling {\n min = 3\n max = 2\n }", "maximum count must not be less than minimum count (2 < 3)"),
    ("count = 4\n scaling {\n min = 1\n max = 2\n }", "task group count must not be greater than maximum count"),
    ("count = 1\n scaling {\n min = 2\n max = 3\n }", "job.groups[0].scaling.min: task group count must not be less"),
])
def test_scaling_that_nomad_refuses_is_refused(block: str, message: str) -> None:
    [error] = problems(group_job(block))
    assert message in error, error


def test_a_consul_namespace_is_accepted_with_one_warning_naming_it() -> None:
    job = load(group_job('consul {\n namespace = "team-a"\n }'))
    assert job.warnings == ["consul.namespace: services register in Consul's default namespace, not in team-a "
                            "(namespaces are Consul Enterprise's; the local registry has none)"]


def test_identity_blocks_are_read_with_nomads_defaults() -> None:
    task = load(group_job("", task='identity {\n env = true\n file = true\n aud = ["ignored"]\n }\n'
                                   'identity {\n name = "db"\n aud = ["postgres"]\n ttl = "1h"\n file = true\n'
                                   ' filepath = "local/db.jwt"\n }')).groups[0].tasks[0]
    assert task.identities == (
        Identity(name=DEFAULT_IDENTITY, audience=("nomadproject.io",), env=True, file=True),
        Identity(name="db", audience=("postgres",), file=True, filepath="local/db.jwt", ttl=3600.0),
    )


@pytest.mark.parametrize(("block", "message"), [
    ('identity {\n ttl = "1h"\n }', "identity[0].ttl: ttl for default identity not yet supported"),
    ('identity {\n name = "a b"\n }', "identity[0].name: invalid name 'a b'"),
    ('identity {\n name = "x"\n filepath = "x.jwt"\n }', "file must be true in order to specify filepath"),
    ('identity {\n name = "x"\n file = true\n filepath = "../../x.jwt"\n }', "must stay inside the task directory"),
    ('identity {\n name = "x"\n aud = [""]\n }', "identity[0].aud[0]: an empty string is an invalid audience"),
    ('identity {}\n identity {\n name = "default"\n }', "identity[1].name: duplicate identity 'default'"),
])
def test_identities_that_nomad_refuses_are_refused(block: str, message: str) -> None:
    [error] = problems(group_job("", task=block))
    assert message in error, error


def test_cores_are_read_and_not_given_with_cpu() -> None:
    assert load(task_hcl("resources {\n cores = 2\n }")).groups[0].tasks[0].resources.cores == 2
    [error] = problems(task_hcl("resources {\n cores = 1\n cpu = 500\n }"))
    assert "resources.cores: a task can only ask for 'cpu' or 'cores', not both" in error


def config_of(expression: str, tmp_path: Path) -> object:
    path = tmp_path / "job.hcl"
    path.write_text(task_hcl(f"config {{\n x = {expression}\n }}"))
    return load_job(path).groups[0].tasks[0].config["x"]


@pytest.mark.parametrize(("expression", "expected"), [
    # Terraform's documented examples of the same function
    ('uuidv5("dns", "www.terraform.io")', "a5008fae-b28c-5ba5-96cd-82b4c53552d6"),
    ('uuidv5("url", "https://www.terraform.io/")', "9db6f67c-dd95-5ea0-aa5b-e70e5c5f7cf5"),
    ('uuidv5("x500", "CN=Example,C=GB")', "84e09961-4aa4-57f8-95b7-03edb1073253"),
    # a namespace given as a UUID: the oid namespace's own
    ('uuidv5("6ba7b812-9dad-11d1-80b4-00c04fd430c8", "1.2.3")', "42d5e23b-3a02-5135-85c6-52d1102f1f00"),
])
def test_uuidv5_as_go_cty_funcs(expression: str, expected: str, tmp_path: Path) -> None:
    assert config_of(expression, tmp_path) == expected


def test_uuidv5_names_a_namespace_it_does_not_know(tmp_path: Path) -> None:
    [error] = problems(task_hcl('config {\n x = uuidv5("galaxy", "x")\n }'))
    assert "uuidv5() doesn't support namespace galaxy" in error


def test_pathexpand_expands_the_readers_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/reader")
    assert config_of('pathexpand("~/.config/app")', tmp_path) == "/home/reader/.config/app"
    assert config_of('pathexpand("/etc/~x")', tmp_path) == "/etc/~x"
    assert os.environ["HOME"] == "/home/reader"


def test_pathexpand_refuses_another_users_home_and_jobs_sent_to_the_agent(tmp_path: Path) -> None:
    path = tmp_path / "job.hcl"
    path.write_text(task_hcl('config {\n x = pathexpand("~root/x")\n }'))
    with pytest.raises(Exception, match="cannot expand user-specific home dir"):
        load_job(path)
    [error] = problems(task_hcl('config {\n x = pathexpand("~/x")\n }'))
    assert "pathexpand() is not available to jobs submitted to the agent" in error


def test_nomads_json_shape_carries_them_both_ways() -> None:
    """As a Nomad 1.7+ command line sends them: the default identity in ``Identity``, durations in nanoseconds."""
    sent = {"Job": {"ID": "x", "Type": "batch", "TaskGroups": [{
        "Name": "g", "Count": 2, "MaxRunDuration": 5_000_000_000, "Consul": {"Namespace": ""},
        "Scaling": {"Min": 1, "Max": 3, "Enabled": True, "Type": "horizontal", "Policy": {"cooldown": "1m"}, "ID": "",
                    "Namespace": "", "Target": {}, "CreateIndex": 0, "ModifyIndex": 0},
        "Tasks": [{"Name": "t", "Driver": "raw_exec", "Resources": {"Cores": 1, "CPU": None},
                   "Identity": {"Name": "default", "Audience": ["nomadproject.io"], "Env": True, "File": False,
                                "TTL": 0, "ChangeMode": "", "Filepath": "", "ServiceName": "", "ChangeSignal": "",
                                "ExtraClaims": None},
                   "Identities": [{"Name": "db", "Audience": ["pg"], "TTL": 3_600_000_000_000, "File": True}]}],
    }]}}
    job = load(json.dumps(sent), "json")
    group = job.groups[0]
    assert (group.max_run_duration, group.scaling) == (5.0, Scaling(min=1, max=3, policy={"cooldown": "1m"}))
    assert group.tasks[0].resources.cores == 1
    assert group.tasks[0].identities == (Identity(audience=("nomadproject.io",), env=True),
                                         Identity(name="db", audience=("pg",), file=True, ttl=3600.0))
    assert job.warnings == []
    kept = evaluate_job_text(json.dumps(sent), "json")[1]  # the canonical document, as the agent keeps it
    assert load(json.dumps(to_nomad(kept)), "json").groups == job.groups  # and shows it again (job inspect)
