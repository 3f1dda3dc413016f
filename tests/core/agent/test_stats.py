"""A running allocation's resource usage through the API and ``herder alloc status -stats``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

MIB = 1 << 20
HUNGRY = """
job "hungry" {
  group "g" {
    task "hog" {
      driver = "raw_exec"
      config {
        command = "sh"
        args    = ["-c", "trap 'exit 0' TERM; x=$(head -c 67108864 /dev/zero | tr '\\\\0' x); sleep 3600 & wait"]
      }
      kill_timeout = "5s"
    }
    task "spin" {
      driver = "raw_exec"
      config {
        command = "sh"
        args    = ["-c", "trap 'exit 0' TERM; while :; do :; done"]
      }
      kill_timeout = "5s"
    }
  }
}
"""


@pytest.fixture(scope="module")
def hungry(shared_agent: AgentProcess) -> Iterator[str]:
    """The allocation of a job with a task holding 64 MiB and one spinning on a CPU; stopped after."""
    alloc_id = str(shared_agent.submit(HUNGRY)["allocations"][0]["id"])
    shared_agent.wait_task(alloc_id, "hog")
    shared_agent.wait_task(alloc_id, "spin")
    yield alloc_id
    with shared_agent.http() as http:
        http.delete("/v1/jobs/hungry")
    shared_agent.wait_task(alloc_id, "spin", "dead")


def stats(agent: AgentProcess, alloc_id: str) -> dict[str, Any]:
    with agent.http() as http:
        response = http.get(f"/v1/allocations/{alloc_id}/stats")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_route_shows_memory_and_cpu(shared_agent: AgentProcess, hungry: str) -> None:
    def spinning() -> dict[str, Any] | None:
        found = stats(shared_agent, hungry)
        percent = found["tasks"]["spin"]["cpu_percent"]
        return found if percent is not None and percent > 20 else None

    found = wait_for(spinning, 60, lambda: f"the spinning task to show over 20 % CPU: {stats(shared_agent, hungry)}")
    assert found["id"] == hungry and found["name"] == "hungry.g[0]"
    spin = found["tasks"]["spin"]
    assert spin["state"] == "running" and spin["driver"] == "raw_exec" and spin["cpu_total_ns"] > 0

    def holding() -> dict[str, Any] | None:
        hog = stats(shared_agent, hungry)["tasks"]["hog"]
        return hog if hog["memory_rss_bytes"] >= 60 * MIB and hog["pids"] == 2 else None  # the shell and its sleep

    hog = wait_for(holding, 60, lambda: f"the hog to show 60 MiB in 2 processes: {stats(shared_agent, hungry)}")
    assert hog["memory_usage_bytes"] is None and hog["memory_limit_bytes"] is None  # raw_exec: no cgroup of its own


def test_the_route_refuses_what_it_cannot_find(shared_agent: AgentProcess) -> None:
    with shared_agent.http() as http:
        response = http.get("/v1/allocations/no-such-alloc/stats")
    assert response.status_code == 404 and "no allocation" in response.json()["error"]


def test_alloc_status_stats(shared_agent: AgentProcess, hungry: str) -> None:
    table = shared_agent.cli("alloc", "status", "-stats", hungry[:6])
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    header = lines.index("Task 'hog' (raw_exec) is running, 0 restart(s)")
    assert lines[header + 1].split() == ["RSS", "Mem", "usage", "Mem", "limit", "CPU", "%", "CPU", "time",
                                         "Throttled", "Throttled", "time", "Pids"]
    assert "MiB" in lines[header + 2] and lines[header + 2].split()[2:4] == ["-", "-"]

    as_json = shared_agent.cli("alloc", "status", "--stats", "--json", hungry[:6])
    assert as_json.returncode == 0, as_json.stderr
    numbers = json.loads(as_json.stdout)
    assert numbers["id"] == hungry and numbers["tasks"]["spin"]["cpu_total_ns"] > 0
