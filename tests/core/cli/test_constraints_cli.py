"""Constraints and datacenters on the command line: ``herder run`` places nothing the node does not
satisfy and says which constraint filtered it; ``herder validate --node`` says so before any run;
``[client] meta`` and ``node_class`` are what ``${meta.*}`` and ``${node.class}`` see."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.waiting import TIMEOUT

CONFIG = """
datacenter = "eu-west-1"
[client]
node_class = "compute"
[client.meta]
rack = "r12"
tags = "ssd, gpu"
"""


def herder(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "herder.toml"
    config.write_text(CONFIG)
    return subprocess.run([sys.executable, "-m", "herder", *args[:1], "--config", str(config), "--data-dir",
                           str(tmp_path / "data"), *args[1:]], capture_output=True, text=True, timeout=TIMEOUT,
                          stdin=subprocess.DEVNULL)


def job_file(tmp_path: Path, constraints: str, datacenters: str = '["eu-*"]') -> tuple[Path, Path]:
    """A batch job whose task leaves a file behind when it runs; the job file and that file."""
    marker = tmp_path / "ran"
    path = tmp_path / "job.nomad"
    path.write_text(f'job "placed" {{\n  type = "batch"\n  datacenters = {datacenters}\n  group "g" {{\n'
                    f'{constraints}\n    task "t" {{\n      driver = "raw_exec"\n'
                    f'      config {{\n        command = "/bin/sh"\n'
                    f'        args = ["-c", "echo ${{node.class}} ${{meta.rack}} > {marker}"]\n      }}\n'
                    '    }\n  }\n}\n')
    return path, marker


def constraint(attribute: str, value: str, operator: str = "=") -> str:
    return (f'    constraint {{\n      attribute = "{attribute}"\n      operator = "{operator}"\n'
            f'      value = "{value}"\n    }}')


@pytest.mark.slow
def test_a_constraint_the_node_fails_names_itself_and_nothing_runs(tmp_path: Path) -> None:
    path, marker = job_file(tmp_path, constraint("${attr.kernel.name}", "windows"))
    done = herder(tmp_path, "run", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Constraint "${attr.kernel.name} = windows" filtered 1 node' in done.stderr, done.stderr
    assert 'Task Group "g" (failed to place 1 allocation)' in done.stderr
    assert not marker.exists()


@pytest.mark.slow
def test_meta_with_regexp_and_set_contains_places_the_job(tmp_path: Path) -> None:
    constraints = "\n".join([constraint("${meta.rack}", "^r[0-9]+$", "regexp"),
                             constraint("${meta.tags}", "gpu,ssd", "set_contains"),
                             constraint("${node.class}", "compute")])
    path, marker = job_file(tmp_path, constraints)
    done = herder(tmp_path, "run", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.read_text() == "compute r12\n"  # the node's class and meta, interpolated at run time too


@pytest.mark.slow
def test_a_set_the_node_does_not_contain_filters_it(tmp_path: Path) -> None:
    path, marker = job_file(tmp_path, constraint("${meta.tags}", "gpu,nvme", "set_contains"))
    done = herder(tmp_path, "run", str(path))
    assert 'Constraint "${meta.tags} set_contains gpu,nvme" filtered 1 node' in done.stderr, done.stderr
    assert done.returncode == 1 and not marker.exists()


def test_validate_node_refuses_another_datacenter_before_any_run(tmp_path: Path) -> None:
    path, _ = job_file(tmp_path, "", '["us-east-1"]')
    plain = herder(tmp_path, "validate", str(path))
    assert plain.returncode == 0, plain.stderr  # the job itself is valid
    done = herder(tmp_path, "validate", "--node", str(path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "job placed does not fit this node" in done.stderr
    assert 'No nodes are available in datacenter "us-east-1"' in done.stderr
    assert not (tmp_path / "data").exists()  # a check, not a run: no data dir made


def test_validate_node_passes_a_job_the_node_satisfies_and_names_a_failing_one(tmp_path: Path) -> None:
    path, _ = job_file(tmp_path, constraint("${meta.rack}", "^r1", "regexp"))
    done = herder(tmp_path, "validate", "--node", str(path))
    assert done.returncode == 0 and "Job validation successful" in done.stdout, done.stdout + done.stderr
    path, _ = job_file(tmp_path, constraint("${attr.cpu.numcores}", "100000", ">="))
    done = herder(tmp_path, "validate", "--node", str(path))
    assert done.returncode == 2
    assert 'Constraint "${attr.cpu.numcores} >= 100000" filtered 1 node' in done.stderr, done.stderr


def test_node_shows_what_constraints_see(tmp_path: Path) -> None:
    done = herder(tmp_path, "node", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["node"]["node.class"] == "compute" and shown["node"]["node.datacenter"] == "eu-west-1"
    assert shown["meta"] == {"rack": "r12", "tags": "ssd, gpu"}
    assert shown["attributes"]["driver.raw_exec"] == "1" and shown["attributes"]["nomad.version"] == "1.1.2"
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_disk_larger_than_the_data_dirs_free_space_is_not_placed(tmp_path: Path) -> None:
    path, marker = job_file(tmp_path, "    ephemeral_disk {\n      size = 2147483647\n    }")
    done = herder(tmp_path, "run", str(path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert 'Dimension "disk" exhausted on 1 node' in done.stderr, done.stderr
    assert not marker.exists()
