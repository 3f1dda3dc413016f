"""A rescheduled allocation as the real ``nomad`` command line shows it: its replacement, its
attempts, the next reschedule time, and the job's future rescheduling attempts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

FLAKY = """
job "{name}" {{
  datacenters = ["dc1"]
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
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "sh"
        args    = ["-c", "exit 1"]
      }}
    }}
  }}
}}
"""


def allocs(agent: NomadAgent, job: str) -> list[dict[str, Any]]:
    """The job's allocations, oldest first."""
    return sorted(agent.get(f"/v1/job/{job}/allocations"), key=lambda a: a["CreateTime"])


def test_alloc_status_shows_the_replacement_the_attempts_and_the_next_time(nomad_agent: NomadAgent,
                                                                           tmp_path: Path) -> None:
    quick = tmp_path / "quick.nomad"
    quick.write_text(FLAKY.format(name="quick", delay="200ms"))
    run = nomad_agent.nomad("job", "run", "-detach", str(quick))
    assert run.returncode == 0, run.stderr
    wait_for(lambda: len(allocs(nomad_agent, "quick")) == 3 and all(
        a["ClientStatus"] == "failed" for a in allocs(nomad_agent, "quick")), what="three failed allocations")
    first, second, third = allocs(nomad_agent, "quick")
    detail = nomad_agent.get(f"/v1/allocation/{third['ID']}")
    assert detail["PreviousAllocation"] == second["ID"] and detail["NextAllocation"] == ""
    events = detail["RescheduleTracker"]["Events"]
    assert [(e["PrevAllocID"], e["Delay"]) for e in events] == [(first["ID"], 200_000_000),
                                                                 (second["ID"], 200_000_000)]

    status = nomad_agent.nomad("alloc", "status", second["ID"])
    assert status.returncode == 0, status.stderr
    assert "Reschedule Attempts  = 1/2" in status.stdout
    assert "Desired Description  = alloc was rescheduled because it failed" in status.stdout
    assert f"Replacement Alloc ID = {third['ID'][:8]}" in status.stdout
    last = nomad_agent.nomad("alloc", "status", third["ID"])
    assert "Reschedule Attempts = 2/2" in last.stdout and "Replacement Alloc ID" not in last.stdout

    later = tmp_path / "later.nomad"
    later.write_text(FLAKY.format(name="later", delay="30m"))
    assert nomad_agent.nomad("job", "run", "-detach", str(later)).returncode == 0
    wait_for(lambda: allocs(nomad_agent, "later")[0]["FollowupEvalID"], what="a follow-up evaluation")
    pending = nomad_agent.nomad("alloc", "status", allocs(nomad_agent, "later")[0]["ID"])
    assert re.search(r"Reschedule Eligibility = (30m|29m\S*) from now", pending.stdout), pending.stdout
    job = nomad_agent.nomad("job", "status", "later")
    assert "Future Rescheduling Attempts" in job.stdout, job.stdout
    assert re.search(r"g +\S{8} +(30m|29m\S*) from now", job.stdout), job.stdout
    assert nomad_agent.nomad("job", "stop", "-detach", "later").returncode == 0
