"""Versions, updates and deployments on a real agent with real processes: scaled in place, rolled
``max_parallel`` at a time, canaries promoted, a broken version rolled back, and a deployment that
goes on after the agent is killed."""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

# A web server per allocation, healthy once its http check passes; ${VERSION} tells the versions
# apart (an env change: destructive), and each start appends its pid to a file named after the allocation.
WEB = """
job "{name}" {{
  update {{
    max_parallel      = {max_parallel}
    health_check      = "{health_check}"
    min_healthy_time  = "{min_healthy}"
    healthy_deadline  = "{healthy_deadline}"
    progress_deadline = "{progress_deadline}"
    auto_revert       = true
    canary            = {canary}
  }}
  group "app" {{
    count = {count}
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "sh"
        args    = ["-c", "echo $$ >> {pids}/$NOMAD_ALLOC_ID; {command}"]
      }}
      env {{
        VERSION = "{version}"
      }}
      resources {{
        network {{
          port "http" {{}}
        }}
      }}
      service {{
        name = "web"
        port = "http"
        check {{
          name     = "{check}"
          type     = "http"
          path     = "/"
          interval = "1s"
          timeout  = "1s"
        }}
      }}
      kill_timeout   = "3s"
      shutdown_delay = "{shutdown_delay}"
    }}
  }}
}}
"""

SERVE = "exec python3 -m http.server --bind 127.0.0.1 $NOMAD_PORT_http"
BROKEN = "exit 1"


def web(pids: Path, name: str, *, version: str = "1", count: int = 2, max_parallel: int = 1, canary: int = 0,
        command: str = SERVE, health_check: str = "checks", min_healthy: str = "1s", healthy_deadline: str = "20s",
        progress_deadline: str = "40s", check: str = "alive", shutdown_delay: str = "0s") -> str:
    return WEB.format(pids=pids, name=name, version=version, count=count, max_parallel=max_parallel, canary=canary,
                      command=command, health_check=health_check, min_healthy=min_healthy,
                      healthy_deadline=healthy_deadline, progress_deadline=progress_deadline, check=check,
                      shutdown_delay=shutdown_delay)


def get(agent: AgentProcess, path: str) -> Any:
    with agent.http() as http:
        response = http.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def allocs(agent: AgentProcess, job: str) -> list[dict[str, Any]]:
    """The job's allocations that run, with their status."""
    listed = get(agent, f"/v1/jobs/{job}")["allocations"]
    return [get(agent, f"/v1/allocations/{a['id']}") for a in listed if a["status"] in ("pending", "running")]


def env_version(alloc: dict[str, Any], pids: Path) -> str | None:
    return (pids / alloc["id"]).read_text() if (pids / alloc["id"]).exists() else None


def latest_deployment(agent: AgentProcess, job: str) -> dict[str, Any] | None:
    found = get(agent, f"/v1/deployments?job={job}")["deployments"]
    return found[0] if found else None


def deployment_ends(agent: AgentProcess, job: str, version: int, status: str = "successful") -> dict[str, Any]:
    def ended() -> dict[str, Any] | None:  # not only the latest: a rollback may follow a failure at once
        found = [d for d in get(agent, f"/v1/deployments?job={job}")["deployments"] if d["version"] == version]
        return found[0] if found and found[0]["status"] == status else None

    return wait_for(ended, 60.0, lambda: f"deployment of version {version} {status}: {latest_deployment(agent, job)}")


def healthy_instances(agent: AgentProcess, job: str) -> int:
    """How many allocations of the job have their service registered and passing, and answer on it."""
    count = 0
    for alloc in allocs(agent, job):
        checks = alloc["tasks"]["server"]["checks"]
        if not checks or any(c["status"] != "passing" for c in checks):
            continue
        port = next(p["value"] for p in alloc["ports"] if p["label"] == "http")
        try:
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2.0)
        except httpx.HTTPError:
            continue
        count += 1
    return count


def versions(agent: AgentProcess, job: str) -> list[dict[str, Any]]:
    return list(get(agent, f"/v1/jobs/{job}/versions")["versions"])


@pytest.mark.slow
def test_count_2_to_3_keeps_the_running_allocations_and_their_pids(shared_agent: AgentProcess, tmp_path: Path) -> None:
    agent, job = shared_agent, "scaled"
    pids = tmp_path / "pids"
    pids.mkdir()
    agent.submit(web(pids, job, count=2))
    deployment_ends(agent, job, 0)
    before = {a["id"]: (pids / a["id"]).read_text() for a in allocs(agent, job)}
    assert len(before) == 2
    scaled = agent.cli("job", "scale", job, "app", "3")
    assert scaled.returncode == 0, scaled.stderr
    deployment_ends(agent, job, 1)
    after = {a["id"]: a for a in allocs(agent, job)}
    assert set(before) < set(after) and len(after) == 3
    assert {a: (pids / a).read_text() for a in before} == before  # the same processes: not started again
    assert sorted(a["index"] for a in after.values()) == [0, 1, 2]
    # Submitted with count = 1, the file stops the highest indexes.
    agent.submit(web(pids, job, count=1))
    wait_for(lambda: [a["index"] for a in allocs(agent, job)] == [0], 30.0, "only index 0 left")
    history = versions(agent, job)
    assert [v["version"] for v in history] == [2, 1, 0]
    assert "~ groups.app.count: 3 -> 1" in history[0]["changes"]
    shown = agent.cli("job", "history", "-p", job)
    assert shown.returncode == 0 and "    ~ groups.app.count: 3 -> 1" in shown.stdout, shown.stdout + shown.stderr
    assert shown.stdout.startswith("Version 2  ") and "Version 1  " in shown.stdout and "app=3" in shown.stdout


@pytest.mark.slow
def test_what_cannot_be_done_is_refused_with_a_reason(shared_agent: AgentProcess, tmp_path: Path) -> None:
    agent, job = shared_agent, "refusals"
    pids = tmp_path / "pids"
    pids.mkdir()
    agent.submit(web(pids, job, count=1, health_check="task_states"))
    deployment = deployment_ends(agent, job, 0)
    with agent.http() as http:
        for method, path, body, status, message in (
            ("POST", "/v1/jobs/nosuch/scale", {"group": "app", "count": 1}, 404, "no job 'nosuch'"),
            ("POST", f"/v1/jobs/{job}/scale", {"group": "nosuch", "count": 1}, 404, "has no group 'nosuch'"),
            ("POST", f"/v1/jobs/{job}/scale", {"group": "app", "count": 5000}, 422, "body.count"),
            ("POST", f"/v1/jobs/{job}/revert", {"version": 9}, 404, "has no version 9"),
            ("POST", f"/v1/jobs/{job}/promote", {}, 409, "can no longer change"),
            ("POST", f"/v1/deployments/{deployment['id']}/fail", None, 409, "is successful"),
            ("GET", "/v1/deployments/nosuch", None, 404, "no deployment 'nosuch'"),
        ):
            answer = http.request(method, path, json=body)
            assert answer.status_code == status and message in answer.text, (path, answer.text)
    refused = agent.cli("job", "revert", job, "9")
    assert refused.returncode == 1 and "has no version 9" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_a_change_of_checks_updates_in_place_and_the_registrations_follow(shared_agent: AgentProcess,
                                                                          tmp_path: Path) -> None:
    agent, job = shared_agent, "inplace"
    pids = tmp_path / "pids"
    pids.mkdir()
    agent.submit(web(pids, job, count=2))
    deployment_ends(agent, job, 0)
    before = {a["id"]: (pids / a["id"]).read_text() for a in allocs(agent, job)}
    agent.submit(web(pids, job, count=2, check="up"))

    def checks_renamed() -> list[dict[str, Any]] | None:
        now = allocs(agent, job)
        names = {c["check"] for a in now for c in a["tasks"]["server"]["checks"]}
        return now if names == {"up"} else None

    now = wait_for(checks_renamed, 30.0, lambda: f"the checks renamed: {allocs(agent, job)}")
    assert {a["id"]: (pids / a["id"]).read_text() for a in now} == before  # the same processes
    history = versions(agent, job)
    assert all(a["job_id"] == history[0]["job_id"] for a in now)
    assert history[0]["stable"] and latest_deployment(agent, job)["version"] == 0  # nothing to deploy
    assert history[0]["changes"] == ["- groups.app.tasks.server.services.web.checks.alive: {...}",
                                     "+ groups.app.tasks.server.services.web.checks.up: {...}"]


@pytest.mark.slow
def test_a_rolling_update_keeps_max_parallel_down_and_the_version_stable(shared_agent: AgentProcess,
                                                                         tmp_path: Path) -> None:
    agent, job = shared_agent, "rolled"
    pids = tmp_path / "pids"
    pids.mkdir()
    # As a user keeping a service up does: a stopped instance is deregistered, then serves out its
    # shutdown_delay, so that a client that read the registry just before still reaches it.
    served = functools.partial(web, pids, job, count=4, max_parallel=2, shutdown_delay="1s")
    agent.submit(served())
    deployment_ends(agent, job, 0)
    wait_for(lambda: healthy_instances(agent, job) == 4, 30.0, "4 healthy instances")
    old = {a["id"] for a in allocs(agent, job)}
    seen: list[int] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            seen.append(healthy_instances(agent, job))

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        agent.submit(served(version="2"))
        deployment = deployment_ends(agent, job, 1)
        wait_for(lambda: healthy_instances(agent, job) == 4, 30.0, "4 healthy instances of version 1")
    finally:
        done.set()
        poller.join()
    assert min(seen) >= 2, seen
    assert deployment["groups"]["app"]["healthy"] == 4
    now = allocs(agent, job)
    assert not old & {a["id"] for a in now} and len(now) == 4
    assert [v["stable"] for v in versions(agent, job)] == [True, True]
    assert any(e["type"] == "Deployment" and "of 4 healthy" in e["message"]
               for e in now[0]["tasks"]["server"]["events"])


@pytest.mark.slow
def test_a_broken_version_is_rolled_back_to_the_last_stable_one(shared_agent: AgentProcess, tmp_path: Path) -> None:
    agent, job = shared_agent, "reverted"
    pids = tmp_path / "pids"
    pids.mkdir()
    # Healthy once running for 1 s; the broken version's allocations fail at once, and with no allocation
    # turning healthy for 4 s its deployment fails (Nomad's rule: not at the first unhealthy one).
    quick = {"health_check": "task_states", "healthy_deadline": "3s", "progress_deadline": "4s"}
    agent.submit(web(pids, job, count=2, **quick))
    deployment_ends(agent, job, 0)
    agent.submit(web(pids, job, count=2, version="2", command=BROKEN, **quick))
    failed = deployment_ends(agent, job, 1, "failed")
    assert failed["description"] == "Failed due to progress deadline"
    deployment_ends(agent, job, 2)  # version 0 submitted again as version 2, and deployed
    history = versions(agent, job)
    assert [(v["version"], v["stable"]) for v in history] == [(2, True), (1, False), (0, True)]
    assert history[2]["job_id"] == history[0]["job_id"]
    running = allocs(agent, job)
    assert len(running) == 2 and all(a["job_id"] == history[0]["job_id"] for a in running)
    events = [e["message"] for a in get(agent, f"/v1/jobs/{job}")["allocations"]
              for e in get(agent, f"/v1/allocations/{a['id']}")["tasks"]["server"]["events"]
              if e["type"] == "Deployment"]
    assert any("rolled back to version 0" in message for message in events), events


@pytest.mark.slow
def test_a_canary_runs_beside_the_old_version_until_promoted(shared_agent: AgentProcess, tmp_path: Path) -> None:
    agent, job = shared_agent, "canaried"
    pids = tmp_path / "pids"
    pids.mkdir()
    agent.submit(web(pids, job, count=2, canary=1))
    deployment_ends(agent, job, 0)
    old = {a["id"] for a in allocs(agent, job)}
    agent.submit(web(pids, job, count=2, canary=1, version="2"))

    def canary_healthy() -> dict[str, Any] | None:
        found = latest_deployment(agent, job)
        group = found["groups"]["app"] if found and found["version"] == 1 else None
        return found if group and group["canaries"] and group["healthy"] == 1 else None

    deployment = wait_for(canary_healthy, 30.0, lambda: f"a healthy canary: {latest_deployment(agent, job)}")
    assert deployment["status"] == "running"
    running = {a["id"] for a in allocs(agent, job)}
    assert old < running and len(running) == 3  # the canary beside both old allocations
    promoted = agent.cli("job", "promote", job)
    assert promoted.returncode == 0, promoted.stderr
    deployment_ends(agent, job, 1)
    now = {a["id"] for a in allocs(agent, job)}
    assert len(now) == 2 and not now & old and deployment["groups"]["app"]["canaries"][0] in now
    status = agent.cli("deployment", "status", deployment["id"][:8])
    assert "successful" in status.stdout and "canaries 1/1 promoted" in status.stdout, status.stdout


@pytest.mark.slow
def test_a_deployment_goes_on_after_the_agent_is_killed(agent: AgentProcess, tmp_path: Path) -> None:
    job = "survivor"
    pids = tmp_path / "pids"
    pids.mkdir()
    agent.submit(web(pids, job, count=3, min_healthy="2s"))
    deployment_ends(agent, job, 0)
    agent.submit(web(pids, job, count=3, version="2", min_healthy="2s"))

    def one_placed() -> dict[str, Any] | None:  # and running: its port is bound before the agent dies
        found = latest_deployment(agent, job)
        if not (found and found["version"] == 1 and found["groups"]["app"]["placed"] == 1):
            return None
        (placed,) = found["allocations"]
        return found if get(agent, f"/v1/allocations/{placed}")["tasks"]["server"]["state"] == "running" else None

    wait_for(one_placed, 30.0, lambda: f"one allocation placed and running: {latest_deployment(agent, job)}")
    agent.kill()
    agent.start()
    deployment = deployment_ends(agent, job, 1)
    assert deployment["groups"]["app"]["placed"] == 3
    running = allocs(agent, job)
    assert sorted(a["index"] for a in running) == [0, 1, 2]
    assert set(deployment["allocations"]) == {a["id"] for a in running}
    # Nothing placed twice: three old allocations and three new ones were ever started, each once.
    started = {path.name: path.read_text().split() for path in pids.iterdir()}
    assert len(started) == 6 and all(len(pids_of) == 1 for pids_of in started.values()), started


@pytest.mark.slow
def test_a_manual_health_check_waits_for_set_health(shared_agent: AgentProcess, tmp_path: Path) -> None:
    agent, job = shared_agent, "manual"
    pids = tmp_path / "pids"
    pids.mkdir()
    agent.submit(web(pids, job, count=1, health_check="manual"))
    (alloc,) = wait_for(lambda: [a for a in allocs(agent, job) if a["status"] == "running"], 30.0,
                        "a running allocation")
    deployment = latest_deployment(agent, job)
    assert deployment is not None and deployment["status"] == "running"
    assert deployment["allocations"] == {alloc["id"]: None}  # running, yet not healthy until told
    wrong = agent.cli("deployment", "set-health", "--healthy", "nosuch", deployment["id"])
    assert wrong.returncode == 1 and "has no allocation nosuch" in wrong.stderr, wrong.stderr
    told = agent.cli("deployment", "set-health", "--healthy", alloc["id"], deployment["id"][:8])
    assert told.returncode == 0, told.stderr
    deployment_ends(agent, job, 0)
    assert versions(agent, job)[0]["stable"]
