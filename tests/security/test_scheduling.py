"""Versions, deployments, rescheduling and sticky data against an API client and a task.

- An agent marked ineligible takes no new job, yet a revert and a scale (submissions of a version) placed
  new allocations at once, and a failed allocation was replaced on it as if it were eligible.
- ``auto_revert`` rolled a failed deployment back to the latest stable version, and when that rollback
  failed too (the task fails whatever version runs), rolled it back to the same job again: a new
  deployment and a new allocation as fast as the task fails, for ever.
- With ``ephemeral_disk { sticky = true }`` a canary is placed beside the allocation of its index, which
  runs on: the canary took its ``alloc/data`` from under its running tasks (free, being alive, to swap it
  for a link between the agent's check and its rename).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.agent import AgentProcess
from tests.support.processes import wait_until_gone
from tests.support.waiting import TIMEOUT, wait_for


@pytest.fixture(scope="module")
def agent() -> Iterator[NomadAgent]:
    root = Path(tempfile.mkdtemp(prefix="herder-scheduling-"))
    root.chmod(0o711)  # nobody must reach its task dir
    process = NomadAgent(root)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()
        assert not wait_until_gone(root), "processes left behind"
        shutil.rmtree(root)


@pytest.fixture
def flags(agent: NomadAgent, request: pytest.FixtureRequest) -> Path:
    """A directory the tasks (user nobody) see, for the test to tell them when to fail."""
    path = agent.root / f"flags-{request.node.name}"
    path.mkdir(mode=0o755)
    return path


def sleeper(name: str, env: str, extra: str = "") -> str:
    return f"""
job "{name}" {{
  group "g" {{
    {extra}
    task "t" {{
      driver = "raw_exec"
      user   = "nobody"
      env {{
        V = "{env}"
      }}
      config {{
        command = "/bin/sleep"
        args    = ["3600"]
      }}
    }}
  }}
}}
"""


def allocations(agent: NomadAgent, job: str) -> list[dict[str, Any]]:
    with agent.http() as http:
        return list(http.get(f"/v1/jobs/{job}").json()["allocations"])


def eligibility(agent: NomadAgent, eligible: bool) -> None:
    with agent.nomad_http() as http:
        [node] = http.get("/v1/nodes").json()
        changed = http.put(f"/v1/node/{node['ID']}/eligibility",
                           json={"Eligibility": "eligible" if eligible else "ineligible"})
    assert changed.status_code == 200, changed.text


def test_revert_and_scale_place_nothing_on_an_ineligible_agent(agent: NomadAgent) -> None:
    [first] = agent.submit(sleeper("kept-out", "1"))["allocations"]
    agent.submit(sleeper("kept-out", "2"))  # its allocation placed once the first one is dead
    wait_for(lambda: [a["status"] for a in allocations(agent, "kept-out") if a["id"] != first["id"]] == ["running"],
             what="version 1 running")
    before = {a["id"] for a in allocations(agent, "kept-out")}
    eligibility(agent, False)
    try:
        with agent.http() as http:
            reverted = http.post("/v1/jobs/kept-out/revert", json={"version": 0})
            scaled = http.post("/v1/jobs/kept-out/scale", json={"group": "g", "count": 3})
        with agent.nomad_http() as http:
            nomad_reverted = http.put("/v1/job/kept-out/revert", json={"JobID": "kept-out", "JobVersion": 0})
            nomad_scaled = http.put("/v1/job/kept-out/scale", json={"Count": 3, "Target": {"Group": "g"}})
        placed = [a["id"] for a in allocations(agent, "kept-out") if a["id"] not in before]
        assert placed == [], f"an ineligible agent placed {placed}"
        assert (reverted.status_code, scaled.status_code) == (409, 409), (reverted.text, scaled.text)
        assert nomad_reverted.status_code != 200 and nomad_scaled.status_code != 200
    finally:
        eligibility(agent, True)
        agent.cli("job", "stop", "kept-out")


FAILING = """
job "failing" {
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      delay          = "1s"
      delay_function = "constant"
      unlimited      = true
    }
    task "t" {
      driver = "raw_exec"
      user   = "nobody"
      config {
        command = "/bin/sh"
        args    = ["-c", "while [ ! -e %s ]; do sleep 0.1; done; exit 1"]
      }
    }
  }
}
"""


def test_a_failed_allocation_is_not_replaced_on_an_ineligible_agent(agent: NomadAgent, flags: Path) -> None:
    go = flags / "fail-now"
    first = agent.submit(FAILING % go)["allocations"][0]["id"]
    agent.wait_task(first, "t")
    eligibility(agent, False)
    try:
        go.touch()  # the task fails now, on an ineligible agent
        agent.wait_task(first, "t", "dead")

        def settled() -> bool:
            replaced = bool(agent.alloc(first)["next_allocation"])
            return replaced or "cannot be replaced now" in agent.log.read_text()

        wait_for(settled, what="a replacement placed, or put off")
        assert not agent.alloc(first)["next_allocation"], "an ineligible agent placed a replacement"
    finally:
        eligibility(agent, True)
        agent.cli("job", "stop", "failing")


ROLLBACK = """
job "rollback" {
  update {
    max_parallel      = 1
    health_check      = "task_states"
    min_healthy_time  = "1s"
    healthy_deadline  = "5s"
    progress_deadline = "0"
    auto_revert       = true
  }
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }
    task "t" {
      driver = "raw_exec"
      user   = "nobody"
      env {
        V = "%s"
      }
      config {
        command = "/bin/sh"
        # Whatever version runs, it fails once the flag is there.
        args    = ["-c", "test -e %s && exit 1; exec sleep 3600"]
      }
    }
  }
}
"""


def test_a_rollback_that_fails_is_not_rolled_back_for_ever(agent: NomadAgent, flags: Path) -> None:
    flag = flags / "broken"

    def deployments() -> list[dict[str, Any]]:
        with agent.http() as http:
            return list(http.get("/v1/deployments", params={"job": "rollback"}).json()["deployments"])

    agent.submit(ROLLBACK % ("0", flag))
    wait_for(lambda: [d["status"] for d in deployments()] == ["successful"], what="version 0 deployed")
    flag.touch()
    agent.submit(ROLLBACK % ("1", flag))  # fails, rolled back to version 0 as version 2, which fails too

    def rolled_back_failed() -> bool:
        found = deployments()
        return len(found) > 3 or any(d["version"] == 2 and d["status"] == "failed" for d in found)

    try:
        wait_for(rolled_back_failed, what="the rollback's deployment failed")
        last = next(d for d in deployments() if d["version"] == 2)

        def told() -> bool:
            events = [e["message"] for alloc_id in last["allocations"]
                      for e in agent.alloc(alloc_id)["tasks"]["t"]["events"] if e["type"] == "Deployment"]
            return len(deployments()) > 3 or any("not rolled back" in m for m in events)

        wait_for(told, what="the failed rollback's end")
        found = deployments()
        assert [(d["version"], d["status"]) for d in found] == [(2, "failed"), (1, "failed"), (0, "successful")]
        with agent.http() as http:
            assert len(http.get("/v1/jobs/rollback/versions").json()["versions"]) == 3
    finally:
        agent.cli("job", "stop", "rollback")


CANARY = """
job "canary" {
  update {
    max_parallel     = 1
    canary           = 1
    health_check     = "task_states"
    min_healthy_time = "1s"
    healthy_deadline = "1m"
  }
  group "g" {
    ephemeral_disk {
      sticky = true
    }
    task "t" {
      driver = "raw_exec"
      user   = "nobody"
      env {
        V = "%s"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $V > $NOMAD_ALLOC_DIR/data/v$V; exec sleep 3600"]
      }
    }
  }
}
"""


def test_a_canary_leaves_the_running_allocation_its_data(agent: NomadAgent) -> None:
    [old] = agent.submit(CANARY % "0")["allocations"]
    agent.wait_task(old["id"], "t")
    data = agent.data_dir / "allocs" / old["id"] / "alloc" / "data"
    wait_for(lambda: (data / "v0").exists(), what="the first version's file")
    try:
        agent.submit(CANARY % "1")
        canary = wait_for(lambda: next((a["id"] for a in allocations(agent, "canary") if a["id"] != old["id"]), None),
                          what="the canary placed")
        agent.wait_task(canary, "t")
        assert agent.alloc(old["id"])["status"] == "running"
        assert (data / "v0").is_file(), "the canary took alloc/data from the allocation still running"
        events = [e["type"] for e in agent.alloc(canary)["tasks"]["t"]["events"]]
        assert "Alloc Data Moved" not in events
    finally:
        agent.cli("job", "stop", "canary")


MANY = """
job "many" {
  # %s
  group "g" {
    task "t" {
      driver       = "raw_exec"
      user         = "nobody"
      kill_timeout = "%dms"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
"""


def test_a_job_keeps_a_bounded_number_of_versions(agent: NomadAgent) -> None:
    """Each version holds its job's text, up to the job size limit: a client submitting in a loop (here a
    change made in place, so nothing restarts) grew ``state.db`` by a text each time, for ever."""
    padding = "x" * 100_000
    try:
        for number in range(20):
            agent.submit(MANY % (padding, number + 1))
        with agent.http() as http:
            kept = [v["version"] for v in http.get("/v1/jobs/many/versions").json()["versions"]]
            assert kept == [19, 18, 17, 16, 15, 14]
            assert http.post("/v1/jobs/many/revert", json={"version": 0}).status_code == 404
            assert http.post("/v1/jobs/many/revert", json={"version": 14}).status_code == 200
    finally:
        agent.cli("job", "stop", "many")


DENIED = """
job "denied" {
  update {
    max_parallel      = 1
    health_check      = "manual"
    healthy_deadline  = "10m"
    progress_deadline = "20m"
  }
  group "g" {
    count = 2
    task "t" {
      driver = "raw_exec"
      user   = "%s"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
"""


def test_a_deployment_places_no_allocation_of_a_user_denied_since(tmp_path: Path) -> None:
    """A rolling deployment of a version whose tasks run as root, allowed when it was submitted; the operator
    then denies root to raw_exec and restarts the agent: the deployment went on placing (and starting) the
    version's allocations as root."""
    root = tmp_path / "agent"
    root.mkdir()
    agent = AgentProcess(root)
    agent.start()

    def deployment() -> dict[str, Any]:
        with agent.http() as http:
            return dict(http.get("/v1/deployments", params={"job": "denied"}).json()["deployments"][0])

    def healthy(found: dict[str, Any]) -> None:
        waiting = [alloc_id for alloc_id, health in found["allocations"].items() if health is None]
        with agent.http() as http:
            answer = http.post(f"/v1/deployments/{found['id']}/health", json={"healthy": waiting})
        assert answer.status_code == 200, answer.text

    try:
        agent.submit(DENIED % "nobody")
        first = wait_for(lambda: (d := deployment()) and len(d["allocations"]) == 2 and d, what="version 0 placed")
        healthy(first)
        wait_for(lambda: deployment()["status"] == "successful", what="version 0 deployed")
        agent.submit(DENIED % "root")  # one allocation at a time, each waiting for its health
        placed = wait_for(lambda: (d := deployment())["version"] == 1 and d["allocations"] and d,
                          what="version 1's first allocation")
        agent.terminate()  # its tasks run on
        with agent.config.open("a") as config:
            config.write('[client]\nuser_checked_drivers = ["raw_exec"]\n')
        agent.start()
        healthy(placed)  # the deployment goes on: its next allocation would run as root

        def ended() -> dict[str, Any] | None:
            found = deployment()
            return found if found["status"] != "running" or len(found["allocations"]) > 1 else None

        found = wait_for(ended, what="the deployment failed, or placed on")
        assert list(found["allocations"]) == list(placed["allocations"]), "an allocation of a denied user placed"
        assert found["status"] == "failed" and "denied" in found["description"], found
    finally:
        agent.shutdown()


WIDE = 1_000
"""Groups of a job of 130 kB whose every group is renamed by its next version: the history compared each
of the diff's 50,000 paths with each of its 2,000 blocks added or removed, a minute of a worker thread on
every read here (hours for a job of a megabyte)."""


def test_history_of_a_wide_job_is_linear(agent: NomadAgent) -> None:
    def wide(prefix: str) -> str:
        groups = "".join(f'group "{prefix}{i}" {{\n count = {1 if i == 0 else 0}\n task "t" {{\n'
                         f' driver = "raw_exec"\n user = "nobody"\n'
                         f' config {{\n command = "/bin/sleep"\n args = ["3600"]\n }}\n }}\n}}\n' for i in range(WIDE))
        return f'job "wide" {{\n{groups}}}\n'

    try:
        with agent.http() as http:
            http.timeout = httpx.Timeout(120.0)
            for prefix in ("g", "h"):
                submitted = http.post("/v1/jobs", json={"text": wide(prefix), "format": "hcl"})
                assert submitted.status_code == 200, submitted.text
            http.timeout = httpx.Timeout(TIMEOUT)
            history = http.get("/v1/jobs/wide/versions")
        assert history.status_code == 200, history.text
        [newest, _] = history.json()["versions"]
        assert len(newest["changes"]) == 2 * WIDE
    finally:
        agent.cli("job", "stop", "wide")


def test_a_deployment_moves_on_nothing_on_an_ineligible_agent(agent: NomadAgent) -> None:
    """A rolling deployment under way when the agent is marked ineligible: its next step stopped an old
    allocation and placed a new one of the new version, as on an eligible agent."""
    rolling = DENIED.replace('"denied"', '"rolling"').replace('args    = ["3600"]', 'args    = ["3600", "%s"]')

    def deployment() -> dict[str, Any]:
        with agent.http() as http:
            return dict(http.get("/v1/deployments", params={"job": "rolling"}).json()["deployments"][0])

    def healthy(found: dict[str, Any]) -> None:
        waiting = [alloc_id for alloc_id, health in found["allocations"].items() if health is None]
        with agent.http() as http:
            answer = http.post(f"/v1/deployments/{found['id']}/health", json={"healthy": waiting})
        assert answer.status_code == 200, answer.text

    try:
        agent.submit(rolling % ("nobody", "0"))
        healthy(wait_for(lambda: (d := deployment()) and len(d["allocations"]) == 2 and d, what="version 0 placed"))
        wait_for(lambda: deployment()["status"] == "successful", what="version 0 deployed")
        agent.submit(rolling % ("nobody", "1"))  # one allocation at a time, each waiting for its health
        placed = wait_for(lambda: (d := deployment())["version"] == 1 and d["allocations"] and d,
                          what="version 1's first allocation")
        eligibility(agent, False)
        try:
            healthy(placed)  # its next step, at once: stop an old allocation, to place its replacement
            old = [a for a in agent.get("/v1/job/rolling/allocations") if a["JobVersion"] == 0]
            kept = [a["ID"] for a in old if a["DesiredStatus"] == "run"]
            assert len(kept) == 1, f"an ineligible agent stopped the last old allocation to replace it: {old}"
            assert list(deployment()["allocations"]) == list(placed["allocations"])
        finally:
            eligibility(agent, True)
    finally:
        agent.cli("job", "stop", "rolling")
