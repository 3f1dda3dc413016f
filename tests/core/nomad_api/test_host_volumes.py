"""The node's host volumes through the Nomad-compatible API, as the real ``nomad`` command line shows them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.waiting import wait_for

from .conftest import NomadAgent, require_nomad

# An agent and the real nomad command line as subprocesses: the same on every Python.
pytestmark = pytest.mark.slow


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[NomadAgent]:
    require_nomad()
    (tmp_path / "certs").mkdir()
    process = NomadAgent(tmp_path / "agent", extra=f"""
[client.host_volume.pgdata]
path = "{tmp_path / 'pg'}"
create = true
[client.host_volume.certs]
path = "{tmp_path / 'certs'}"
read_only = true
""")
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def test_node_status_verbose_lists_the_host_volumes(agent: NomadAgent, tmp_path: Path) -> None:
    [stub] = agent.get("/v1/nodes")
    node = agent.get(f"/v1/node/{stub['ID']}")
    assert node["HostVolumes"] == {
        "certs": {"Name": "certs", "Path": str(tmp_path / "certs"), "ReadOnly": True},
        "pgdata": {"Name": "pgdata", "Path": str(tmp_path / "pg"), "ReadOnly": False},
    }
    shown = agent.nomad("node", "status", "-verbose", "-self")
    assert shown.returncode == 0, shown.stderr
    section = shown.stdout.split("Host Volumes", 1)[1]
    rows = [line.split() for line in section.strip().splitlines()[1:3]]
    assert rows == [["certs", "true", str(tmp_path / "certs")], ["pgdata", "false", str(tmp_path / "pg")]], \
        shown.stdout


JOB = """
job "%(name)s" {
  type = "batch"
  group "g" {
    volume "data" {
      type   = "host"
      source = "%(source)s"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
    }
  }
}
"""


def test_nomad_job_run_places_only_where_the_volume_is(agent: NomadAgent, tmp_path: Path) -> None:
    missing = tmp_path / "missing.nomad"
    missing.write_text(JOB % {"name": "wants-nope", "source": "nope"})
    refused = agent.nomad("job", "run", str(missing))
    assert refused.returncode == 2, refused.stdout + refused.stderr  # nothing placed, as Nomad's exit code says
    assert 'Constraint "missing compatible host volumes"' in refused.stdout, refused.stdout
    placed = tmp_path / "placed.nomad"
    placed.write_text(JOB % {"name": "wants-pgdata", "source": "pgdata"})
    run = agent.nomad("job", "run", "-detach", str(placed))
    assert run.returncode == 0, run.stdout + run.stderr
    wait_for(lambda: agent.get("/v1/job/wants-pgdata/allocations"), what="the allocation of wants-pgdata")
    placed.write_text(JOB % {"name": "wants-pgdata", "source": "certs"})  # read-only here, and asked read-write
    plan = agent.nomad("job", "plan", "-verbose", str(placed))
    assert 'Source: "pgdata" => "certs"' in plan.stdout, plan.stdout + plan.stderr
    assert 'Constraint "missing compatible host volumes": 1 nodes excluded by filter' in plan.stdout, plan.stdout
