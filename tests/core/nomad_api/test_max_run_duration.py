"""An allocation killed for its group's ``max_run_duration`` is complete, and says why, as Nomad's."""

from __future__ import annotations

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
