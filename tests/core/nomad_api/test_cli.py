"""The real ``nomad`` 1.1 command line drives the agent through its Nomad-compatible API (SPEC §17)."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.terminal import Terminal
from tests.support.waiting import TIMEOUT, wait_for

# Agents and the real nomad command line, as subprocesses: the API they test is the same on every Python.
pytestmark = pytest.mark.slow

SERVICE = """
job "{name}" {{
  datacenters = ["dc1"]
  group "g" {{
    count = {count}
    update {{
      min_healthy_time = "1s"
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo {word}; echo to-stderr >&2; exec sleep 3600"]
      }}
      kill_timeout = "5s"
    }}
  }}
}}
"""

# From Nomad's documentation (website/content/docs/internals/filesystem.mdx, Nomad 1.1), unchanged:
# a task outside any group, no update block (Nomad's defaults: healthy after 10 s).
NOMAD_DOCS_EXAMPLE = """
job "example" {
  datacenters = ["dc1"]

  task "task3" {
    driver = "raw_exec"

    config {
      command = "/bin/sh"
      args = ["-c", "sleep 600"]
    }
  }
}
"""


def job_file(tmp_path: Path, text: str, name: str = "job.nomad") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def service(tmp_path: Path, name: str, count: int = 1, word: str = "hello") -> Path:
    return job_file(tmp_path, SERVICE.format(name=name, count=count, word=word), f"{name}.nomad")


def allocs(agent: NomadAgent, job: str) -> list[dict[str, Any]]:
    return list(agent.get(f"/v1/job/{job}/allocations"))


def running_alloc(agent: NomadAgent, job: str) -> str:
    def found() -> str | None:
        running = [a for a in allocs(agent, job) if a["ClientStatus"] == "running"]
        return running[0]["ID"] if running else None

    return wait_for(found, what=f"a running allocation of {job}")


def stop(agent: NomadAgent, job: str) -> None:
    done = agent.nomad("job", "stop", job)
    assert done.returncode == 0, done.stdout + done.stderr

    def dead() -> bool:
        return all(a["ClientStatus"] != "running" for a in allocs(agent, job))

    wait_for(dead, what=f"{job} stopped")


def test_node_status_shows_one_ready_node_with_its_drivers(nomad_agent: NomadAgent) -> None:
    listed = nomad_agent.nomad("node", "status")
    assert listed.returncode == 0, listed.stderr
    rows = listed.stdout.strip().splitlines()
    assert len(rows) == 2 and rows[1].split()[-1] == "ready", listed.stdout

    shown = nomad_agent.nomad("node", "status", "-self")
    assert shown.returncode == 0, shown.stderr
    assert "Status          = ready" in shown.stdout
    assert "raw_exec" in shown.stdout.split("Driver Status   = ")[1].splitlines()[0].split(",")

    verbose = nomad_agent.nomad("node", "status", "-verbose", "-self")
    assert verbose.returncode == 0, verbose.stderr
    drivers_table = verbose.stdout.split("\nDrivers\n")[1].split("\n\n")[0]
    assert any(row.split()[:3] == ["raw_exec", "true", "true"] for row in drivers_table.splitlines())
    assert "driver.raw_exec" in verbose.stdout and "kernel.name" in verbose.stdout
    drivers = nomad_agent.get("/v1/node/" + nomad_agent.get("/v1/nodes")[0]["ID"])["Drivers"]
    assert drivers["raw_exec"]["Healthy"] is True and drivers["raw_exec"]["Detected"] is True


def test_agent_self_leader_and_regions(nomad_agent: NomadAgent) -> None:
    assert nomad_agent.get("/v1/status/leader") == f"127.0.0.1:{nomad_agent.nomad_port}"
    assert nomad_agent.get("/v1/regions") == ["global"]
    me = nomad_agent.get("/v1/agent/self")
    assert me["stats"]["client"]["node_id"] == nomad_agent.get("/v1/nodes")[0]["ID"]
    assert me["config"]["Datacenter"] == "dc1"


def test_job_run_monitors_the_deployment_then_status_inspect_history_and_stop(
        nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = service(tmp_path, "web", count=2)
    run = nomad_agent.nomad("job", "run", str(path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert 'finished with status "complete"' in run.stdout
    assert "Deployment completed successfully" in run.stdout
    assert run.stdout.count('created: node "') == 2, run.stdout

    status = nomad_agent.nomad("job", "status", "web")
    assert status.returncode == 0, status.stderr
    assert "Status        = running" in status.stdout
    assert status.stdout.count(" running ") >= 2  # both allocations
    listed = nomad_agent.nomad("job", "status")
    assert any(line.split()[:4] == ["web", "service", "50", "running"] for line in listed.stdout.splitlines())

    inspected = nomad_agent.nomad("job", "inspect", "web")
    assert inspected.returncode == 0, inspected.stderr
    job = json.loads(inspected.stdout)["Job"]
    assert job["ID"] == "web" and job["TaskGroups"][0]["Count"] == 2

    # A changed job is a new version; the agent's own API sees the same job.
    changed = service(tmp_path, "web", count=2, word="again")
    again = nomad_agent.nomad("job", "run", str(changed))
    assert again.returncode == 0, again.stdout + again.stderr
    history = nomad_agent.nomad("job", "history", "web")
    assert "Version     = 1" in history.stdout and "Version     = 0" in history.stdout, history.stdout
    with nomad_agent.http() as http:
        assert http.get("/v1/jobs/web").json()["name"] == "web"

    stop(nomad_agent, "web")
    assert all(a["DesiredStatus"] == "stop" for a in allocs(nomad_agent, "web"))
    assert nomad_agent.get("/v1/job/web")["Status"] == "dead"


def test_job_run_detach_prints_the_evaluation(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "detached")))
    assert run.returncode == 0, run.stderr
    evaluation = run.stdout.split("Evaluation ID: ")[1].strip()
    assert nomad_agent.get(f"/v1/evaluation/{evaluation}")["Status"] == "complete"
    alloc = running_alloc(nomad_agent, "detached")
    stopped = nomad_agent.nomad("job", "stop", "-purge", "-detach", "detached")
    assert stopped.returncode == 0, stopped.stderr
    # Purged: the job is gone at once, its allocation stops (and is collected).
    wait_for(lambda: all(a["ID"] != alloc or a["ClientStatus"] != "running"
                         for a in nomad_agent.get("/v1/allocations")), what="detached stopped")


def test_alloc_status_logs_signal_and_restart(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "logged", word="line-one")))
    assert run.returncode == 0, run.stderr
    alloc = running_alloc(nomad_agent, "logged")
    wait_for(lambda: "line-one" in nomad_agent.nomad("alloc", "logs", alloc).stdout, what="the task's output")

    status = nomad_agent.nomad("alloc", "status", alloc[:8])
    assert status.returncode == 0, status.stderr
    assert f"ID                  = {alloc}" in status.stdout and 'Task "t" is "running"' in status.stdout
    assert "Started" in status.stdout

    assert nomad_agent.nomad("alloc", "logs", "-stderr", alloc, "t").stdout == "to-stderr\n"
    assert nomad_agent.nomad("alloc", "logs", "-tail", "-n", "1", alloc).stdout == "line-one\n"

    signalled = nomad_agent.nomad("alloc", "signal", "-s", "SIGUSR1", alloc, "t")
    assert signalled.returncode == 0, signalled.stderr
    wait_for(lambda: any(e["Type"] == "Signaling" for e in nomad_agent.get(f"/v1/allocation/{alloc}")
                         ["TaskStates"]["t"]["Events"]), what="the signal event")

    def restarts() -> int:
        return int(nomad_agent.get(f"/v1/allocation/{alloc}")["TaskStates"]["t"]["Restarts"])

    wait_for(lambda: nomad_agent.get(f"/v1/allocation/{alloc}")["TaskStates"]["t"]["State"] == "running",
             what="the task running again")
    before = restarts()
    restarted = nomad_agent.nomad("alloc", "restart", alloc, "t")
    assert restarted.returncode == 0, restarted.stderr
    wait_for(lambda: restarts() > before, what="the task restarted")
    stop(nomad_agent, "logged")


def test_alloc_exec_runs_a_shell_on_the_local_terminal(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "execd")))
    assert run.returncode == 0, run.stderr
    alloc = running_alloc(nomad_agent, "execd")
    env = {**os.environ, "NOMAD_ADDR": nomad_agent.nomad_url, "NOMAD_TOKEN": nomad_agent.token, "NO_COLOR": "1"}
    shell = Terminal(["nomad", "alloc", "exec", "-i", "-t", "-task", "t", alloc, "/bin/sh"], env)
    try:
        shell.type(b"tty\n")
        shell.expect(rb"/dev/pts/\d+")
        shell.type(b"echo $((6*7))\n")
        shell.expect(rb"\b42\b")
        shell.set_size(45, 123)  # SIGWINCH to nomad, which sends the new size

        def resized() -> bool:
            shell.type(b"stty size\n")
            return shell.shows(rb"\b45 123\b", 1.0)

        wait_for(resized, what=f"`stty size` to say 45 123; the terminal shows {bytes(shell.output)!r}")
        shell.type(b"exit 3\n")
        assert shell.proc.wait(TIMEOUT) == 3, bytes(shell.output)
    finally:
        shell.close()
    stop(nomad_agent, "execd")


def test_alloc_logs_follow_streams_until_the_task_ends(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = job_file(tmp_path, """
        job "follow" {
          type = "batch"
          group "g" {
            task "t" {
              driver = "raw_exec"
              config {
                command = "/bin/sh"
                args    = ["-c", "echo first; while [ ! -e ${NOMAD_ALLOC_DIR}/go ]; do sleep 0.1; done; echo last"]
              }
            }
          }
        }
    """)
    assert nomad_agent.nomad("job", "run", "-detach", str(path)).returncode == 0
    alloc = running_alloc(nomad_agent, "follow")
    env_dir = nomad_agent.data_dir / "allocs" / alloc / "alloc"
    wait_for(env_dir.exists, what="the allocation's directory")
    following: list[str] = []
    done = threading.Event()

    def follow() -> None:
        following.append(nomad_agent.nomad("alloc", "logs", "-f", alloc).stdout)
        done.set()

    threading.Thread(target=follow, daemon=True).start()
    wait_for(lambda: "first" in nomad_agent.nomad("alloc", "logs", alloc).stdout, what="the first line")
    assert not done.is_set()  # it follows: the task has not ended
    (env_dir / "go").touch()
    assert done.wait(60)
    assert following[0] == "first\nlast\n"


def test_dispatch_and_periodic_force(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    param = job_file(tmp_path, """
        job "param" {
          type = "batch"
          parameterized {
            meta_required = ["who"]
            payload       = "optional"
          }
          group "g" {
            task "t" {
              driver = "raw_exec"
              dispatch_payload { file = "input.txt" }
              config {
                command = "/bin/sh"
                args    = ["-c", "echo hi-$NOMAD_META_who; cat local/input.txt"]
              }
            }
          }
        }
    """, "param.nomad")
    cron = job_file(tmp_path, """
        job "cron" {
          type = "batch"
          periodic {
            cron = "0 0 1 1 *"
          }
          group "g" {
            task "t" {
              driver = "raw_exec"
              config {
                command = "/bin/echo"
                args    = ["tick"]
              }
            }
          }
        }
    """, "cron.nomad")
    registered = nomad_agent.nomad("job", "run", str(param))
    assert registered.returncode == 0 and "Job registration successful" in registered.stdout, registered.stderr
    periodic = nomad_agent.nomad("job", "run", str(cron))
    assert "Approximate next launch time" in periodic.stdout, periodic.stdout + periodic.stderr
    (tmp_path / "payload").write_text("the-payload\n")

    dispatched = nomad_agent.nomad("job", "dispatch", "-meta", "who=me", "param", str(tmp_path / "payload"))
    assert dispatched.returncode == 0, dispatched.stdout + dispatched.stderr
    child = dispatched.stdout.split("Dispatched Job ID = ")[1].split()[0]
    assert child.startswith("param/dispatch-")
    refused = nomad_agent.nomad("job", "dispatch", "param")
    assert refused.returncode != 0 and "who" in refused.stderr

    forced = nomad_agent.nomad("job", "periodic", "force", "cron")
    assert forced.returncode == 0, forced.stdout + forced.stderr
    assert 'finished with status "complete"' in forced.stdout

    def finished(job: str) -> str:
        found = allocs(nomad_agent, job)
        return found[0]["ID"] if found and found[0]["ClientStatus"] == "complete" else ""

    dispatched_alloc = wait_for(lambda: finished(child), what="the dispatched child")
    assert nomad_agent.nomad("alloc", "logs", dispatched_alloc).stdout == "hi-me\nthe-payload\n"
    children = [j["ID"] for j in nomad_agent.get("/v1/jobs", prefix="cron/periodic-")]
    assert len(children) == 1
    wait_for(lambda: finished(children[0]), what="the forced child")
    parent = nomad_agent.nomad("job", "status", "cron")
    assert parent.returncode == 0, parent.stderr
    assert "Next Periodic Launch = 2" in parent.stdout and children[0] in parent.stdout
    dispatcher = nomad_agent.nomad("job", "status", "param")
    assert dispatcher.returncode == 0 and child in dispatcher.stdout.split("Dispatched Jobs")[1]
    for job in ("param", "cron"):
        assert nomad_agent.nomad("job", "stop", "-detach", job).returncode == 0


def test_a_blocking_query_waits_for_a_change(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    with nomad_agent.nomad_http() as http:
        index = int(http.get("/v1/jobs").headers["X-Nomad-Index"])
        started = time.monotonic()
        quiet = http.get("/v1/jobs", params={"index": index, "wait": "1s"})
        assert time.monotonic() - started >= 0.9  # nothing changed: it waited
        assert int(quiet.headers["X-Nomad-Index"]) == index

        answered: list[httpx.Response] = []
        watcher = threading.Thread(target=lambda: answered.append(
            http.get("/v1/jobs", params={"index": index, "wait": "5m"})), daemon=True)
        watcher.start()
        run = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "watched")))
        assert run.returncode == 0, run.stderr
        watcher.join(60)  # well before the 5 minutes: the change answered it
        assert answered and int(answered[0].headers["X-Nomad-Index"]) > index
        assert "watched" in [job["ID"] for job in answered[0].json()]
    running_alloc(nomad_agent, "watched")
    stop(nomad_agent, "watched")


@pytest.mark.parametrize(("method", "path", "status", "text"), [
    ("GET", "/v1/jobs?namespace=other", 200, "[]"),
    ("GET", "/v1/job/nosuch", 404, "job not found"),
    ("GET", "/v1/job/x?namespace=other", 404, "job not found"),
    ("GET", "/v1/jobs?region=elsewhere", 400, "No path to region"),
    ("GET", "/v1/namespace/other", 404, "Namespace not found"),
    ("GET", "/v1/acl/tokens", 400, "ACL support disabled"),
    ("GET", "/v1/acl/policies", 400, "ACL support disabled"),
    ("GET", "/v1/volumes?type=csi", 200, "[]"),
    ("GET", "/v1/plugins?type=csi", 200, "[]"),
    ("GET", "/v1/volume/csi/v", 404, "volume not found"),
    ("GET", "/v1/quotas", 501, "Nomad Enterprise only endpoint"),
    ("GET", "/v1/allocation/nosuch", 404, "alloc not found"),
    ("GET", "/v1/evaluation/nosuch", 404, "eval not found"),
    ("GET", "/v1/deployment/nosuch", 404, "deployment not found"),
    ("GET", "/v1/no/such/route", 404, "404 page not found"),
    ("PUT", "/v1/jobs", 400, "Failed to decode request"),
    ("GET", "/v1/jobs?index=x", 400, "query.index"),
    ("GET", "/v1/jobs?index=1&wait=forever", 400, "Invalid wait time"),
])
def test_what_herder_has_not_answers_as_a_nomad_without_it(nomad_agent: NomadAgent, method: str, path: str,
                                                           status: int, text: str) -> None:
    with nomad_agent.nomad_http() as http:
        response = http.request(method, path, content=b"not json" if method == "PUT" else None)
    assert response.status_code == status, response.text
    assert text in response.text


def test_an_invalid_job_is_refused_naming_the_path(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    path = job_file(tmp_path, """
        job "invalid" {
          group "g" {
            task "t" {
              driver = "raw_exec"
              config {
                nonsense = 1
              }
            }
          }
        }
    """)
    run = nomad_agent.nomad("job", "run", str(path))
    assert run.returncode == 1
    assert "job.groups[0].tasks[0].config.nonsense: unknown key" in run.stderr


def test_a_job_from_nomads_documentation_runs_unchanged(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", str(job_file(tmp_path, NOMAD_DOCS_EXAMPLE)))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Deployment completed successfully" in run.stdout
    (alloc,) = allocs(nomad_agent, "example")
    assert alloc["TaskGroup"] == "task3" and alloc["DeploymentStatus"]["Healthy"] is True
    stop(nomad_agent, "example")
