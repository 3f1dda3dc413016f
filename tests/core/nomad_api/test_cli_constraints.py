"""The real ``nomad`` 1.1 command line and the node's constraints: ``job plan`` and ``job run`` say which
constraint filtered the node (Nomad's ``FailedTGAllocs``) and nothing runs, as ``herder job run`` says
through herder's own API; the node's class and meta are Nomad's ``NodeClass`` and ``Meta``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.nomad_api.conftest import NomadAgent, require_nomad
from tests.core.nomad_api.test_cli import allocs
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    require_nomad()
    started = NomadAgent(tmp_path_factory.mktemp("constraints"),
                         extra='[client]\nnode_class = "compute"\n[client.meta]\nrack = "r12"\ntags = "ssd,gpu"\n')
    started.start()
    try:
        yield started
    finally:
        started.shutdown()


def job_file(tmp_path: Path, name: str, group: str, datacenters: str = '["dc1"]') -> Path:
    path = tmp_path / f"{name}.nomad"
    path.write_text(f'job "{name}" {{\n  datacenters = {datacenters}\n  type = "batch"\n  group "g" {{\n{group}\n'
                    '    task "t" {\n      driver = "raw_exec"\n      config {\n        command = "/bin/true"\n'
                    '      }\n    }\n  }\n}\n')
    return path


def placed(agent: NomadAgent, job: str) -> list[str]:
    """The allocations of ``job`` the agent has (a job it cannot place, it does not keep either)."""
    return [alloc["ID"] for alloc in agent.get("/v1/allocations") if alloc["JobID"] == job]


WINDOWS = '    constraint {\n      attribute = "${attr.kernel.name}"\n      value = "windows"\n    }'


def test_plan_and_run_name_the_constraint_and_nothing_runs(agent: NomadAgent, tmp_path: Path) -> None:
    path = job_file(tmp_path, "windows-only", WINDOWS)
    plan = agent.nomad("job", "plan", str(path))
    assert plan.returncode == 1, plan.stdout + plan.stderr  # 1: allocations would be created (or fail to be)
    assert 'Task Group "g" (failed to place 1 allocation)' in plan.stdout, plan.stdout
    assert 'Constraint "${attr.kernel.name} = windows": 1 nodes excluded by filter' in plan.stdout

    run = agent.nomad("job", "run", str(path))
    assert run.returncode == 2, run.stdout + run.stderr  # Nomad's exit code for allocations that failed to place
    assert "failed to place all allocations" in run.stdout, run.stdout
    assert 'Constraint "${attr.kernel.name} = windows": 1 nodes excluded by filter' in run.stdout
    assert placed(agent, "windows-only") == []


def test_herders_own_job_run_names_the_constraint_too(agent: NomadAgent, tmp_path: Path) -> None:
    done = agent.cli("job", "run", str(job_file(tmp_path, "windows-herder", WINDOWS)))
    assert done.returncode != 0, done.stdout + done.stderr
    assert 'Constraint "${attr.kernel.name} = windows" filtered 1 node' in done.stderr, done.stderr
    assert placed(agent, "windows-herder") == []


def test_another_datacenter_is_no_node_at_all(agent: NomadAgent, tmp_path: Path) -> None:
    run = agent.nomad("job", "run", str(job_file(tmp_path, "elsewhere", "", '["dc2"]')))
    assert run.returncode == 2, run.stdout + run.stderr
    assert "No nodes were eligible for evaluation" in run.stdout
    assert 'No nodes are available in datacenter "dc2"' in run.stdout
    assert placed(agent, "elsewhere") == []


def test_meta_regexp_and_set_contains_run_and_the_node_shows_its_meta(agent: NomadAgent, tmp_path: Path) -> None:
    group = ('    constraint {\n      attribute = "${meta.rack}"\n      regexp = "^r[0-9]+$"\n    }\n'
             '    constraint {\n      attribute = "${meta.tags}"\n      set_contains = "gpu"\n    }\n'
             '    constraint {\n      attribute = "${node.class}"\n      value = "compute"\n    }')
    run = agent.nomad("job", "run", "-detach", str(job_file(tmp_path, "on-meta", group)))
    assert run.returncode == 0, run.stdout + run.stderr
    wait_for(lambda: [a["ClientStatus"] for a in allocs(agent, "on-meta")] == ["complete"], what="on-meta complete")

    (node,) = agent.get("/v1/nodes")
    full = agent.get(f"/v1/node/{node['ID']}")
    assert node["NodeClass"] == full["NodeClass"] == "compute"
    assert full["Meta"] == {"rack": "r12", "tags": "ssd,gpu"}
    assert full["Attributes"]["driver.raw_exec"] == "1" and full["Attributes"]["kernel.name"] == "linux"
    assert int(full["Attributes"]["cpu.totalcompute"]) > 0
