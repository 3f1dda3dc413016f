"""The real ``nomad`` command line over herder's versions and deployments: scale in place, history with
diffs and ``Stable``, revert, eval, canaries promoted by job and by deployment, and a deployment listed,
shown, paused, resumed and failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

JOB = """
job "{name}" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    update {{
      health_check     = "task_states"
      min_healthy_time = "1s"
      healthy_deadline = "30s"
      canary           = {canary}
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo {word}; exec sleep 3600"]
      }}
      kill_timeout = "3s"
    }}
  }}
}}
"""


def job_file(tmp_path: Path, name: str, *, count: int = 2, word: str = "one", canary: int = 0) -> Path:
    path = tmp_path / f"{name}-{word}.nomad"
    path.write_text(JOB.format(name=name, count=count, word=word, canary=canary))
    return path


def running(agent: NomadAgent, job: str) -> set[str]:
    return {a["ID"] for a in agent.get(f"/v1/job/{job}/allocations") if a["ClientStatus"] == "running"}


def deployment(agent: NomadAgent, job: str) -> dict[str, Any]:
    return dict(agent.get(f"/v1/job/{job}/deployment") or {})


def deployed(agent: NomadAgent, job: str, version: int, status: str = "successful") -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:
        found = deployment(agent, job)
        return found if found.get("JobVersion") == version and found.get("Status") == status else None

    return wait_for(ended, 60.0, lambda: f"deployment of {job} version {version} {status}: {deployment(agent, job)}")


def ok(agent: NomadAgent, *args: str) -> str:
    done = agent.nomad(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_scale_history_revert_and_eval(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ok(nomad_agent, "job", "run", str(job_file(tmp_path, "kept")))
    before = running(nomad_agent, "kept")
    assert len(before) == 2
    ok(nomad_agent, "job", "scale", "-detach", "kept", "g", "3")
    deployed(nomad_agent, "kept", 1)
    assert before < running(nomad_agent, "kept") and len(running(nomad_agent, "kept")) == 3  # scaled in place
    ok(nomad_agent, "job", "run", str(job_file(tmp_path, "kept", count=3, word="two")))
    history = ok(nomad_agent, "job", "history", "-p", "kept")
    assert history.count("Stable      = true") == 3, history
    assert '+/- Count: "2" => "3"' in history, history  # Nomad's nested diff, as job plan shows it
    assert '+/- Task: "t"' in history and 'args[1]' in history, history
    assert nomad_agent.get("/v1/job/kept")["Version"] == 2
    ok(nomad_agent, "job", "revert", "kept", "0")
    versions = nomad_agent.get("/v1/job/kept/versions")["Versions"]
    assert [v["Version"] for v in versions] == [3, 2, 1, 0]
    assert [g["Count"] for g in versions[0]["TaskGroups"]] == [2]  # version 0 again, count and all
    deployed(nomad_agent, "kept", 3)
    assert len(running(nomad_agent, "kept")) == 2
    evaluated = ok(nomad_agent, "job", "eval", "-detach", "-verbose", "kept")
    evaluation = evaluated.split('Created eval ID: "')[1].split('"')[0]
    assert nomad_agent.get(f"/v1/evaluation/{evaluation}")["Status"] == "complete"
    assert "Status             = complete" in ok(nomad_agent, "eval", "status", evaluation[:8])
    assert nomad_agent.nomad("job", "revert", "kept", "9").returncode == 1


def test_canaries_promoted_and_a_deployment_paused_resumed_and_failed(nomad_agent: NomadAgent,
                                                                      tmp_path: Path) -> None:
    ok(nomad_agent, "job", "run", str(job_file(tmp_path, "canaried", canary=1)))
    old = running(nomad_agent, "canaried")
    ok(nomad_agent, "job", "run", "-detach", str(job_file(tmp_path, "canaried", word="two", canary=1)))

    def canary_healthy(version: int) -> dict[str, Any] | None:
        found = deployment(nomad_agent, "canaried")
        group = found.get("TaskGroups", {}).get("g", {})
        return found if found.get("JobVersion") == version and group.get("HealthyAllocs") == 1 else None

    found = wait_for(lambda: canary_healthy(1), 30.0,
                     lambda: f"a healthy canary: {deployment(nomad_agent, 'canaried')}")
    assert found["TaskGroups"]["g"]["PlacedCanaries"] and old < running(nomad_agent, "canaried")
    ok(nomad_agent, "job", "promote", "-detach", "canaried")
    deployed(nomad_agent, "canaried", 1)
    assert not old & running(nomad_agent, "canaried")

    ok(nomad_agent, "job", "run", "-detach", str(job_file(tmp_path, "canaried", word="three", canary=1)))
    found = wait_for(lambda: canary_healthy(2), 30.0,
                     lambda: f"a healthy canary: {deployment(nomad_agent, 'canaried')}")
    assert f"{found['ID'][:8]}  canaried  2            running" in ok(nomad_agent, "deployment", "list")
    assert "Canaries" in ok(nomad_agent, "deployment", "status", found["ID"][:8])
    ok(nomad_agent, "deployment", "promote", "-detach", found["ID"][:8])
    deployed(nomad_agent, "canaried", 2)

    ok(nomad_agent, "job", "run", "-detach", str(job_file(tmp_path, "canaried", word="four", canary=1)))
    deployment_id = wait_for(lambda: deployment(nomad_agent, "canaried").get("JobVersion") == 3
                             and deployment(nomad_agent, "canaried")["ID"], 30.0, "version 3 deploying")
    ok(nomad_agent, "deployment", "pause", deployment_id[:8])
    assert nomad_agent.get(f"/v1/deployment/{deployment_id}")["Status"] == "paused"
    ok(nomad_agent, "deployment", "resume", deployment_id[:8])
    assert nomad_agent.get(f"/v1/deployment/{deployment_id}")["Status"] == "running"
    ok(nomad_agent, "deployment", "fail", "-detach", deployment_id[:8])
    assert nomad_agent.get(f"/v1/deployment/{deployment_id}")["Status"] == "failed"
    refused = nomad_agent.nomad("deployment", "resume", deployment_id[:8])
    assert refused.returncode == 1 and "can no longer change" in refused.stdout + refused.stderr


def test_scale_stays_within_the_groups_scaling_bounds(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    text = job_file(tmp_path, "bounded", count=1).read_text()
    path = tmp_path / "bounded.nomad"
    path.write_text(text.replace('group "g" {', 'group "g" {\n    scaling {\n      min = 1\n      max = 2\n'
                                 '      policy {\n        cooldown = "1m"\n      }\n    }', 1))
    ok(nomad_agent, "job", "run", "-detach", str(path))
    for count, wording in (("3", "greater than scaling policy maximum: 3 > 2"),
                           ("0", "less than scaling policy minimum: 0 < 1")):
        refused = nomad_agent.nomad("job", "scale", "-detach", "bounded", "g", count)
        assert refused.returncode == 1 and "400" in refused.stderr and wording in refused.stderr, refused.stderr
        own = nomad_agent.cli("job", "scale", "bounded", "g", count)
        assert own.returncode == 1 and wording in own.stderr, own.stderr
    ok(nomad_agent, "job", "scale", "-detach", "bounded", "g", "2")
    wait_for(lambda: len(running(nomad_agent, "bounded")) == 2, 60.0, "two allocations of bounded")
    ok(nomad_agent, "job", "stop", "-purge", "bounded")
