"""Periodic jobs against a real agent and real processes: registered, not run; their
children launched on schedule, never overlapping when told, forced, stopped with the
parent, and kept on schedule across a kill -9 of the agent without catching up."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import AgentProcess
from tests.support.foreground import HerderRun
from tests.support.waiting import poll, wait_for

pytestmark = pytest.mark.slow

PERIODIC = """
job "{name}" {{
  type = "batch"
  periodic {{
    crons            = ["{cron}"]
    prohibit_overlap = {overlap}
    enabled          = {enabled}
  }}
  group "g" {{
    task "t" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["{script}", "{seconds}"]
      }}
    }}
  }}
}}
"""

CHILD = """#!/bin/sh
echo "$NOMAD_JOB_ID $NOMAD_JOB_PARENT_ID start $(date +%s.%N)" >> {log}
sleep "$1"
echo "$NOMAD_JOB_ID $NOMAD_JOB_PARENT_ID end $(date +%s.%N)" >> {log}
"""
"""Each child records its name, its parent's and when it started and ended, as its tasks see them."""

EVERY_SECOND = "* * * * * * *"
NEVER_SOON = "0 0 0 1 1 * 2099"


@dataclass
class Run:
    child: str
    parent: str
    start: float
    end: float | None

    @property
    def launch(self) -> int:
        """The launch time, from the child's name (``NAME/periodic-<unix seconds>``)."""
        return int(self.child.rpartition("/periodic-")[2])


def periodic_job(tmp_path: Path, name: str, cron: str, *, seconds: float = 0, overlap: bool = False,
                 enabled: bool = True) -> Path:
    script = tmp_path / f"{name}.sh"
    script.write_text(CHILD.format(log=tmp_path / f"{name}.log"))
    job = tmp_path / f"{name}.hcl"
    job.write_text(PERIODIC.format(name=name, cron=cron, overlap=str(overlap).lower(), enabled=str(enabled).lower(),
                                   script=script, seconds=seconds))
    return job


def runs(tmp_path: Path, name: str) -> list[Run]:
    """Every child of ``name`` that started, in the order of their launches."""
    log = tmp_path / f"{name}.log"
    found: dict[str, Run] = {}
    for line in (log.read_text().splitlines() if log.exists() else []):
        child, parent, what, at = line.split()
        if what == "start":
            assert child not in found, f"{child} started twice"
            found[child] = Run(child, parent, float(at), None)
        else:
            found[child].end = float(at)
    return sorted(found.values(), key=lambda run: run.launch)


def wait_runs(tmp_path: Path, name: str, count: int, *, ended: bool = False,
              after: float = 0.0) -> list[Run]:
    """The first ``count`` children launched after ``after`` (ended ones, with ``ended``), once there are."""
    def enough() -> list[Run]:
        found = [r for r in runs(tmp_path, name) if r.launch > after and (r.end is not None or not ended)]
        return found[:count] if len(found) >= count else []

    return wait_for(enough, what=lambda: f"{count} children of {name}; seen {runs(tmp_path, name)}")


def job(agent: AgentProcess, name: str) -> dict[str, Any]:
    with agent.http() as http:
        response = http.get(f"/v1/jobs/{name}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_periodic_job_is_registered_not_run_and_launches_children_two_seconds_apart(
        agent: AgentProcess, tmp_path: Path) -> None:
    submitted = agent.cli("job", "run", str(periodic_job(tmp_path, "every2", "*/2 * * * * * *")))
    assert submitted.returncode == 0, submitted.stderr
    assert "Job every2 registered: periodic */2 * * * * * *" in submitted.stderr
    first = wait_runs(tmp_path, "every2", 3, ended=True)
    assert [b.launch - a.launch for a, b in itertools.pairwise(first)] == [2, 2]
    assert {(r.child.rpartition("/")[0], r.parent) for r in first} == {("every2", "every2")}  # NOMAD_JOB_PARENT_ID

    parent = job(agent, "every2")
    assert parent["allocations"] == [] and parent["status"] == "running" and parent["parent_id"] == ""
    assert {r.child for r in first} <= {child["name"] for child in parent["children"]}
    assert parent["periodic"]["next_launch"] is not None and parent["periodic"]["crons"] == ["*/2 * * * * * *"]
    with agent.http() as http:
        allocations = http.get("/v1/allocations").json()["allocations"]
        listed = {entry["name"]: entry for entry in http.get("/v1/jobs").json()["jobs"]}
    assert all(alloc["job"].startswith("every2/periodic-") for alloc in allocations)  # never the parent itself
    assert listed[first[0].child]["parent_id"] == "every2"  # a child is an ordinary job in the listing

    status = agent.cli("job", "status", "every2")
    assert status.returncode == 0, status.stderr
    assert "next launch 20" in status.stdout and f"child {first[0].child}" in status.stdout
    wait_for(lambda: job(agent, first[0].child)["status"] == "complete", what=f"{first[0].child} complete")
    child = agent.cli("job", "status", first[0].child)  # a name with a "/"
    assert child.returncode == 0 and f"{first[0].child}  complete" in child.stdout, child.stdout + child.stderr
    stopped = agent.cli("job", "stop", first[0].child)
    assert stopped.returncode == 0 and f"Job {first[0].child}: stopping 1 allocation(s)" in stopped.stderr


def test_prohibit_overlap_never_runs_two_children_at_once(agent: AgentProcess, tmp_path: Path) -> None:
    agent.submit(periodic_job(tmp_path, "slow", EVERY_SECOND, seconds=3, overlap=True).read_text())
    children = wait_runs(tmp_path, "slow", 3, ended=True)
    for earlier, later in itertools.pairwise(children):
        assert earlier.end is not None and later.start > earlier.end, f"{later} started while {earlier} ran"


def test_force_launches_a_child_now(agent: AgentProcess, tmp_path: Path) -> None:
    agent.submit(periodic_job(tmp_path, "manual", NEVER_SOON).read_text())
    assert job(agent, "manual")["periodic"]["next_launch"].startswith("2099-01-01T00:00:00")
    before = time.time()
    forced = agent.cli("job", "periodic", "force", "manual")
    assert forced.returncode == 0, forced.stderr
    [run] = wait_runs(tmp_path, "manual", 1, ended=True)
    assert run.parent == "manual" and int(before) <= run.launch <= time.time()
    assert f"launched {run.child}" in forced.stderr

    unknown = agent.cli("job", "periodic", "force", "nothing")
    assert unknown.returncode == 1 and "no periodic job 'nothing'" in unknown.stderr


def test_a_disabled_job_is_registered_and_never_launches(agent: AgentProcess, tmp_path: Path) -> None:
    agent.submit(periodic_job(tmp_path, "off", EVERY_SECOND, enabled=False).read_text())
    registered = job(agent, "off")
    assert registered["periodic"]["enabled"] is False and registered["periodic"]["next_launch"] is None
    forced = agent.cli("job", "periodic", "force", "off")
    assert forced.returncode == 1 and "its launches are disabled" in forced.stderr
    assert job(agent, "off")["children"] == []


def test_stopping_the_parent_stops_its_children_and_its_launches(agent: AgentProcess, tmp_path: Path) -> None:
    agent.submit(periodic_job(tmp_path, "forever", EVERY_SECOND, seconds=3600, overlap=True).read_text())
    wait_runs(tmp_path, "forever", 1)
    stopped = agent.cli("job", "stop", "forever")
    assert stopped.returncode == 0 and "no more launches" in stopped.stderr, stopped.stderr

    def children_dead() -> bool:
        parent = job(agent, "forever")
        return parent["status"] == "stopped" and all(c["status"] != "running" for c in parent["children"])

    wait_for(children_dead, what="the children of the stopped job stopped")
    launched = len(job(agent, "forever")["children"])
    assert job(agent, "forever")["periodic"]["next_launch"] is None
    assert not poll(lambda: len(job(agent, "forever")["children"]) > launched, timeout=3)


def test_the_schedule_survives_a_kill_without_catching_up(agent: AgentProcess, tmp_path: Path) -> None:
    agent.submit(periodic_job(tmp_path, "steady", EVERY_SECOND).read_text())
    wait_runs(tmp_path, "steady", 2)
    agent.kill()
    killed = time.time()
    time.sleep(3)  # deliberate sleep: launch times must pass while the agent is down, for none to be caught up
    restarting = time.time()
    agent.start()
    later = wait_runs(tmp_path, "steady", 3, ended=True, after=restarting)
    missed = [r.child for r in runs(tmp_path, "steady") if killed < r.launch < restarting]
    assert missed == [], f"launches of the agent's downtime were caught up: {missed}"
    assert len({r.launch for r in later}) == 3  # and went on launching, once each time
    assert job(agent, "steady")["status"] == "running"


def test_herder_run_follows_the_schedule_until_interrupted(tmp_path: Path) -> None:
    path = periodic_job(tmp_path, "fg", EVERY_SECOND, seconds=3600, overlap=True)
    run = HerderRun(path, tmp_path / "data")
    started = run.wait_for("Started")
    [child] = wait_runs(tmp_path, "fg", 1)
    assert started[0]["alloc_name"] == f"{child.child}.g[0]" and child.parent == "fg"
    assert run.interrupt() == 0
    assert run.summary is not None and run.summary["status"] == "stopped"
    assert f"Job fg: launched {child.child}; next launch at" in run.stderr
    assert [alloc["name"] for alloc in run.summary["allocs"].values()] == [f"{child.child}.g[0]"]
    [task] = [alloc["tasks"]["t"] for alloc in run.summary["allocs"].values()]
    assert task["state"] == "dead"  # the running child was stopped with the run


def test_herder_run_launches_each_time(tmp_path: Path) -> None:
    run = HerderRun(periodic_job(tmp_path, "fg2", EVERY_SECOND), tmp_path / "data")
    children = wait_runs(tmp_path, "fg2", 2, ended=True)
    assert run.interrupt() == 0
    assert all(f"launched {child.child}" in run.stderr for child in children)
    assert len({event["alloc_id"] for event in run.of("Started")}) >= 2


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "nightly.hcl"


def test_the_nightly_example_registers_and_backs_up_when_forced(agent: AgentProcess) -> None:
    submitted = agent.cli("job", "run", str(EXAMPLE))
    assert submitted.returncode == 0 and "Job nightly registered: periodic 0 3 * * * (Local)" in submitted.stderr, \
        submitted.stderr
    assert "T03:00:00" in job(agent, "nightly")["periodic"]["next_launch"]
    forced = agent.cli("job", "periodic", "force", "nightly")
    assert forced.returncode == 0, forced.stderr

    def child_complete() -> str | None:
        children = job(agent, "nightly")["children"]
        return children[0]["name"] if children and children[0]["status"] == "complete" else None

    child = wait_for(child_complete, what="the forced backup complete")
    [alloc] = job(agent, child)["allocations"]
    logs = agent.cli("alloc", "logs", alloc["id"], "tar")
    assert f"{child} (launched by nightly) wrote " in logs.stdout, logs.stdout + logs.stderr
    archive = Path(logs.stdout.split(" wrote ")[1].strip())
    assert archive.name.endswith(".tar.gz") and archive.stat().st_size > 0
    with agent.http() as http:
        assert "/v1/jobs/{name}/periodic/force" in http.get("/v1/openapi.json").json()["paths"]
