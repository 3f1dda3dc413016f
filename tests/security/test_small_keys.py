"""A job's author (and the operator's data dir) against the smaller keys of a job: ``max_run_duration``,
``identity`` and the key that signs workload identities (SPEC §14).

A group's ``max_run_duration`` is a deadline on the one timer thread every allocation of the agent shares
(restart delays, kill timeouts, replacements, deadlines): a duration of a million years must not stop it
for everybody else. A job of many ``identity`` blocks must not make the agent sign for minutes at each
start of its task. A key file the agent cannot use is refused with a clear error, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.alloc_runner import MAX_RUN_DURATION_EXCEEDED
from tests.support.agent import AgentProcess

TIMED = """
job "%(name)s" {
  type = "batch"
  group "g" {
    max_run_duration = "%(limit)s"
    task "t" {
      driver = "raw_exec"
      config {
        command = "sleep"
        args    = ["300"]
      }
    }
  }
}
"""


@pytest.fixture
def own_agent(tmp_path: Path) -> Iterator[AgentProcess]:
    """An agent of the test's own: the attack, until fixed, leaves its timer dead for good."""
    root = tmp_path / "agent"
    root.mkdir()
    process = AgentProcess(root)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def test_a_deadline_of_a_million_years_stops_no_other_allocations_timer(own_agent: AgentProcess) -> None:
    far = own_agent.submit(TIMED % {"name": "far", "limit": "9999999999h"})["allocations"][0]["id"]
    own_agent.wait_event(far, "t", "Started")  # its deadline is armed before its tasks start
    near = own_agent.submit(TIMED % {"name": "near", "limit": "1s"})["allocations"][0]["id"]
    own_agent.wait_event(near, "t", "Killing")
    (killing,) = [e for e in own_agent.alloc(near)["tasks"]["t"]["events"] if e["type"] == "Killing"]
    assert killing["message"] == MAX_RUN_DURATION_EXCEEDED
    assert own_agent.alloc(far)["tasks"]["t"]["state"] == "running"
