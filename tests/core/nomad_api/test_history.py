"""What an agent finished stays listed after it restarts, until garbage collection removes it:
through herder's API and command line, and the real ``nomad`` command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.nomad_api.conftest import NomadAgent, require_nomad
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

BATCH = """
job "{name}" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 0
      mode     = "fail"
    }}
    reschedule {{
      attempts = 0
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "sh"
        args    = ["-c", "echo {word}; exit {code}"]
      }}
    }}
  }}
}}
"""


def finished(agent: NomadAgent, name: str, word: str, code: int = 0) -> str:
    """Run a batch job whose task prints ``word`` and exits ``code``; its allocation's ID once it is done."""
    alloc_id = str(agent.submit(BATCH.format(name=name, word=word, code=code))["allocations"][0]["id"])
    agent.wait_task(alloc_id, "t", "dead")
    wait_for(lambda: agent.alloc(alloc_id)["status"] in ("complete", "failed"), what=f"{name} finished")
    return alloc_id


def test_finished_jobs_allocations_events_and_logs_outlive_a_restart_until_collected(tmp_path: Path) -> None:
    require_nomad()
    agent = NomadAgent(tmp_path, extra='[client]\ngc_interval = "1h"\njob_gc_threshold = "1h"\n').start()
    try:
        done = finished(agent, "done", "done-word")
        broke = finished(agent, "broke", "broke-word", code=3)
        before = {alloc_id: agent.alloc(alloc_id) for alloc_id in (done, broke)}

        agent.terminate()  # tasks are all dead: nothing is left to reattach
        agent.start()

        with agent.http() as http:
            jobs = {job["name"]: job["status"] for job in http.get("/v1/jobs").json()["jobs"]}
        assert jobs == {"done": "complete", "broke": "failed"}
        for alloc_id, was in before.items():
            now = agent.alloc(alloc_id)
            assert now["status"] == was["status"]
            assert now["tasks"]["t"]["state"] == "dead"
            assert now["tasks"]["t"]["exit_code"] == was["tasks"]["t"]["exit_code"]
            assert now["tasks"]["t"]["events"] == was["tasks"]["t"]["events"]
        logs = agent.cli("alloc", "logs", broke, "t")
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout == "broke-word\n"

        status = agent.nomad("job", "status", "broke")
        assert status.returncode == 0, status.stderr
        assert "Status        = dead" in status.stdout and broke[:8] in status.stdout
        alloc_status = agent.nomad("alloc", "status", broke)
        assert alloc_status.returncode == 0, alloc_status.stderr
        assert "Client Status       = failed" in alloc_status.stdout
        assert "Exit Code: 3" in alloc_status.stdout
        nomad_logs = agent.nomad("alloc", "logs", done)
        assert nomad_logs.returncode == 0, nomad_logs.stderr
        assert nomad_logs.stdout == "done-word\n"

        # A record is read-only: nothing of it runs again, and a stop changes nothing.
        stopped = agent.cli("job", "stop", "done")
        assert stopped.returncode == 0, stopped.stderr
        assert agent.alloc(done)["status"] == "complete"

        # Collected, it is gone from every listing and from the data dir.
        agent.config.write_text(agent.config.read_text().replace('job_gc_threshold = "1h"',
                                                                 'job_gc_threshold = "0s"'))
        agent.terminate()
        agent.start()
        assert agent.alloc(done)["status"] == "complete"  # listed again until the collection
        collected = agent.cli("system", "gc")
        assert collected.returncode == 0, collected.stderr
        assert collected.stderr.strip() == "2 allocation(s) removed, 2 job(s) purged"
        with agent.http() as http:
            assert http.get("/v1/jobs").json()["jobs"] == []
            assert http.get(f"/v1/allocations/{done}").status_code == 404
        gone = agent.nomad("alloc", "logs", done)
        assert gone.returncode == 1 and "No allocation(s) with prefix or id" in gone.stderr
        assert not list((agent.data_dir / "allocs").iterdir())
    finally:
        agent.shutdown()


def test_a_killed_agents_finished_allocation_is_listed_beside_a_reattached_one(tmp_path: Path) -> None:
    require_nomad()
    agent = NomadAgent(tmp_path).start()
    try:
        done = finished(agent, "before", "early")
        service = agent.submit(BATCH.format(name="long", word="late", code=0).replace(
            "exit 0", "exec sleep 3600"))["allocations"][0]["id"]
        agent.wait_task(service, "t")
        agent.kill()
        agent.start()
        agent.wait_event(service, "t", "Reattached")
        with agent.http() as http:
            listed = [alloc["id"] for alloc in http.get("/v1/allocations").json()["allocations"]]
        assert listed == [done, service]  # in the order they were placed
        assert agent.alloc(done)["status"] == "complete"
        assert agent.alloc(service)["status"] == "running"
    finally:
        agent.shutdown()
