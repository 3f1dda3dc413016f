"""Rescheduling through a real agent: a failed allocation replaced after its group's delay, with its
``alloc/data`` when the group's disk is sticky, until its attempts are used; across an agent killed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

FLAKY = """
job "{name}" {{
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts       = 2
      interval       = "1h"
      delay          = "{delay}"
      delay_function = "constant"
      unlimited      = false
    }}
    ephemeral_disk {{
      sticky = true
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "sh"
        args    = ["-c", "echo run >> $NOMAD_ALLOC_DIR/data/runs; wc -l < $NOMAD_ALLOC_DIR/data/runs; exit 1"]
      }}
    }}
  }}
}}
"""


def flaky(name: str, delay: str = "200ms") -> str:
    """A service job whose task counts its runs in ``alloc/data`` and fails at once, rescheduled twice."""
    return FLAKY.format(name=name, delay=delay)


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path_factory.mktemp("reschedule"))
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def allocs(agent: AgentProcess, job: str) -> list[dict[str, Any]]:
    """The allocations of ``job``, each in full, in the order they were placed."""
    with agent.http() as http:
        summaries = http.get(f"/v1/jobs/{job}").json()["allocations"]
    return [agent.alloc(summary["id"]) for summary in summaries]


def epoch(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def test_a_failed_allocation_is_replaced_with_its_data_until_its_attempts_are_used(agent: AgentProcess) -> None:
    agent.submit(flaky("flaky"))
    wait_for(lambda: "allocation flaky.g[0] failed; not rescheduled" in agent.log.read_text(),
             what=lambda: f"the third allocation failed for good: {[a['status'] for a in allocs(agent, 'flaky')]}")
    first, second, third = chain = allocs(agent, "flaky")
    assert [a["status"] for a in chain] == ["failed"] * 3
    assert [a["name"] for a in chain] == ["flaky.g[0]"] * 3
    assert [a["previous_allocation"] for a in chain] == ["", first["id"], second["id"]]
    assert [a["next_allocation"] for a in chain] == [second["id"], third["id"], ""]
    assert [a["reschedule"]["next_at"] for a in chain] == [None] * 3
    tracker = third["reschedule"]
    assert (tracker["attempted"], tracker["attempts"]) == (2, 2)
    assert [(e["previous"], e["delay"]) for e in tracker["events"]] == [(first["id"], 0.2), (second["id"], 0.2)]
    assert epoch(tracker["events"][1]["time"]) >= epoch(tracker["events"][0]["time"]) + 0.2

    # Each run found the runs before it in alloc/data: moved, not copied, from one allocation to the next.
    for n, alloc in enumerate(chain, 1):
        logs = agent.cli("alloc", "logs", alloc["id"], "t")
        assert logs.stdout.strip() == str(n), logs
    assert not (agent.data_dir / "allocs" / first["id"] / "alloc" / "data").exists()
    moved = [e for e in third["tasks"]["t"]["events"] if e["type"] == "Alloc Data Moved"]
    assert moved and moved[0]["details"] == {"previous": second["id"]}

    status = agent.cli("alloc", "status", second["id"])
    assert status.returncode == 0, status.stderr
    assert f"  replaces    {first['id']}" in status.stdout
    assert f"  replaced by {third['id']}" in status.stdout
    assert "  attempts    1/2" in status.stdout


def test_a_stopped_job_is_not_rescheduled(agent: AgentProcess) -> None:
    first = agent.submit(flaky("stopped", delay="30m"))["allocations"][0]["id"]
    wait_for(lambda: agent.alloc(first)["reschedule"]["next_at"] is not None, what="the replacement due")
    stopped = agent.cli("job", "stop", "stopped")
    assert stopped.returncode == 0, stopped.stderr
    assert agent.alloc(first)["reschedule"]["next_at"] is None
    assert len(allocs(agent, "stopped")) == 1


def test_a_pending_replacement_outlives_an_agent_killed(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path).start()
    try:
        first = agent.submit(flaky("later", delay="2s"))["allocations"][0]["id"]
        due = wait_for(lambda: agent.alloc(first)["reschedule"]["next_at"], what="the replacement due")
        agent.kill()
        agent.start()
        wait_for(lambda: len(allocs(agent, "later")) >= 2, what="the replacement placed by the next agent")
        second = allocs(agent, "later")[1]
        assert second["previous_allocation"] == first
        assert epoch(second["reschedule"]["events"][0]["time"]) >= epoch(due)  # not before its time
        wait_for(lambda: agent.alloc(second["id"])["status"] == "failed", what="the replacement failed")
        logs = agent.cli("alloc", "logs", second["id"], "t")
        assert logs.stdout.strip() == "2", logs  # and it had the first one's data
    finally:
        agent.shutdown()


STICKY_SERVICE = """
job "kept" {
  group "g" {
    ephemeral_disk {
      sticky = true
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "sh"
        args    = ["-c", "cd $NOMAD_ALLOC_DIR/data; echo $VERSION >> versions; cat versions; exec sleep 3600"]
      }
      env {
        VERSION = "%s"
      }
      kill_timeout = "1s"
    }
  }
}
"""


def test_a_new_version_of_a_sticky_group_starts_with_the_data_of_the_one_it_replaces(agent: AgentProcess) -> None:
    first = agent.submit(STICKY_SERVICE % "v1")["allocations"][0]["id"]
    wait_for(lambda: agent.cli("alloc", "logs", first, "t").stdout == "v1\n", what="the first version's output")
    agent.submit(STICKY_SERVICE % "v2")  # answered with the live allocations: the first, while it is replaced

    def replacement() -> str | None:
        with agent.http() as http:
            listed = http.get("/v1/jobs/kept").json()["allocations"]
        return next((a["id"] for a in listed if a["id"] != first), None)

    second = wait_for(replacement, what="the second version's allocation")
    wait_for(lambda: agent.cli("alloc", "logs", second, "t").stdout == "v1\nv2\n",
             what=lambda: f"the second version's output: {agent.cli('alloc', 'logs', second, 't').stdout!r}")
    assert agent.alloc(second)["previous_allocation"] == first
    assert agent.alloc(first)["next_allocation"] == second
    assert agent.alloc(first)["status"] == "stopped"
    stopped = agent.cli("job", "stop", "kept")
    assert stopped.returncode == 0, stopped.stderr
