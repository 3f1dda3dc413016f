"""Through the Nomad API: an allocation killed for its group's ``max_run_duration`` is complete and
says why, and the cores a task reserved are shown where Nomad shows them."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

JOB = """
job "timed" {
  type = "batch"
  group "g" {
    max_run_duration = "1s"
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
    }
  }
}
"""


def test_the_allocation_is_complete_with_nomads_description(nomad_agent: NomadAgent) -> None:
    nomad_agent.submit(JOB)

    def ended() -> dict[str, Any] | None:
        (stub,) = nomad_agent.get("/v1/job/timed/allocations")
        return stub if stub["ClientStatus"] != "running" and stub["ClientStatus"] != "pending" else None

    stub = wait_for(ended, 60.0, "the allocation of timed to end")
    alloc = nomad_agent.get(f"/v1/allocation/{stub['ID']}")
    assert alloc["ClientStatus"] == "complete"
    assert alloc["ClientDescription"] == "allocation exceeded max_run_duration"
    killing = [e for e in alloc["TaskStates"]["t"]["Events"] if e["Type"] == "Killing"]
    assert [e["DisplayMessage"] for e in killing] == ["allocation exceeded max_run_duration"]


PINNED = """
job "pinned" {
  group "g" {
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sleep"
        args    = ["300"]
      }
      resources {
        cores = 1
      }
    }
  }
}
"""


def test_reserved_cores_are_shown_as_nomad_shows_them(nomad_agent: NomadAgent) -> None:
    nomad_agent.submit(PINNED)
    (stub,) = nomad_agent.get("/v1/job/pinned/allocations")
    alloc = nomad_agent.get(f"/v1/allocation/{stub['ID']}")
    (core,) = alloc["AllocatedResources"]["Tasks"]["t"]["Cpu"]["ReservedCores"]
    assert core in os.sched_getaffinity(0)
    assert alloc["TaskResources"]["t"]["Cores"] == 1
    assert nomad_agent.nomad("job", "stop", "-purge", "pinned").returncode == 0
