"""The agent killed with SIGKILL and started again reattaches its tasks."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from herder.app import SELF_CHECK_TTL
from tests.support.agent import AgentProcess
from tests.support.consul import ConsulAgent
from tests.support.http import read_url
from tests.support.processes import alive, processes_using
from tests.support.waiting import TIMEOUT, wait_for

WEB = """
job "web" {
  group "app" {
    count = 2
    task "server" {
      driver = "raw_exec"
      config {
        command = "python3"
        args    = ["-m", "http.server", "--bind", "${NOMAD_IP_http}", "${NOMAD_PORT_http}"]
      }
      resources {
        network {
          port "http" {}
        }
      }
      service {
        name = "web"
        port = "http"
        check {
          type     = "http"
          path     = "/"
          interval = "1s"
          timeout  = "1s"
        }
      }
      kill_timeout = "3s"
    }
  }
}
"""


def servers(agent: AgentProcess) -> set[int]:
    """The pids of the web servers (a pyenv shim execs python3 under the same pid)."""
    return {pid for pid, cmd in processes_using(agent.data_dir).items() if "http.server" in cmd}


@pytest.mark.slow
def test_a_killed_agent_reattaches_every_task_on_its_port(agent: AgentProcess) -> None:
    allocs = agent.submit(WEB)["allocations"]
    ports = {}
    for alloc in allocs:
        agent.wait_task(alloc["id"], "server")
        port = agent.alloc(alloc["id"])["ports"][0]["value"]
        read_url(f"http://127.0.0.1:{port}/")
        ports[alloc["id"]] = port
    before = servers(agent)
    assert len(before) == 2

    agent.kill()
    assert servers(agent) == before  # the tasks run on without their agent
    agent.start()

    for alloc_id, port in ports.items():
        agent.wait_event(alloc_id, "server", "Reattached")
        status = agent.alloc(alloc_id)
        assert status["ports"][0]["value"] == port
        task = status["tasks"]["server"]
        assert task["state"] == "running" and task["restarts"] == 0
        assert [e["type"] for e in task["events"]].count("Started") == 1
        read_url(f"http://127.0.0.1:{port}/")
    assert servers(agent) == before  # the same processes, none started twice
    assert all(alive(pid) for pid in before)

    # Services are synced again: the checks run and pass, and the agent is a service itself.
    for alloc_id in ports:
        assert wait_checks(agent, alloc_id) == ["passing"]


def wait_checks(agent: AgentProcess, alloc_id: str) -> list[str]:
    """The statuses of the task's checks, once they pass."""
    def statuses() -> list[str]:
        return [c["status"] for c in agent.alloc(alloc_id)["tasks"]["server"]["checks"]]

    wait_for(lambda: statuses() == ["passing"], what=lambda: f"the checks passing, not {statuses()}", interval=0.2)
    return statuses()


@pytest.mark.slow
def test_sigterm_leaves_tasks_running_and_drain_stops_them(agent: AgentProcess) -> None:
    alloc_id = agent.submit(WEB.replace("count = 2", "count = 1"))["allocations"][0]["id"]
    agent.wait_task(alloc_id, "server")
    read_url(f"http://127.0.0.1:{agent.alloc(alloc_id)['ports'][0]['value']}/")
    before = servers(agent)
    assert agent.terminate() == 0
    assert servers(agent) == before
    assert "exiting; tasks keep running" in agent.log.read_text()

    agent.start("--drain")
    agent.wait_event(alloc_id, "server", "Reattached")
    assert agent.terminate() == 0
    assert not servers(agent)
    assert "every task stopped" in agent.log.read_text()
    agent.start()  # for the fixture's shutdown
    with urllib.request.urlopen(urllib.request.Request(f"{agent.url}/v1/jobs", headers=agent.headers)) as response:
        # Listed until collected, stopped: nothing of it runs again.
        assert [(job["name"], job["status"]) for job in json.load(response)["jobs"]] == [("web", "stopped")]
    assert not servers(agent)


def test_the_agent_is_a_service_and_task_services_are_resynced_in_consul(tmp_path: Path,
                                                                           consul: ConsulAgent) -> None:
    agent = AgentProcess(tmp_path, token="t0ken", extra=f'[services]\nbackend = "consul"\n'
                                                        f'[consul]\naddress = "{consul.address}"\n')
    agent.start()
    try:
        alloc_id = agent.submit(WEB.replace("count = 2", "count = 1"))["allocations"][0]["id"]
        agent.wait_task(alloc_id, "server")
        port = agent.alloc(alloc_id)["ports"][0]["value"]

        def registered() -> dict[str, tuple[int, str]]:
            checks = consul.checks()
            return {s["Service"]: (s["Port"], next((str(c["Status"]) for c in checks.values()  # type: ignore[misc]
                                                    if c["ServiceID"] == sid), ""))
                    for sid, s in consul.services().items()}

        def wait_for_registered(expected: dict[str, tuple[int, str]], timeout: float = TIMEOUT) -> None:
            wait_for(lambda: registered() == expected, timeout,
                     lambda: f"consul to hold {expected}, not {registered()}", interval=0.2)

        wanted = {"herder-client": (agent.port, "passing"), "web": (port, "passing")}
        wait_for_registered(wanted)

        # The agent's own check is a heartbeat: a dead agent turns critical once its TTL ran out.
        agent.kill()
        dead = wanted | {"herder-client": (agent.port, "critical")}
        wait_for_registered(dead, timeout=SELF_CHECK_TTL + TIMEOUT)
        agent.start()
        agent.wait_event(alloc_id, "server", "Reattached")
        wait_for_registered(wanted)
        assert len(consul.services()) == 2  # nothing registered twice
    finally:
        agent.shutdown()
    wait_for_registered({})

