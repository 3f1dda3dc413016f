"""The node's host volumes through the Nomad-compatible API, as the real ``nomad`` command line shows them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import NomadAgent, require_nomad


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
