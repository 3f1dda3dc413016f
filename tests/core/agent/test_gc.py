"""Garbage collection through a real agent: finished allocations and jobs go, running ones stay."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from herder import app
from herder.state import LIVE_STATUSES
from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.processes import alive, processes_using
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow

BATCH = """
job "{name}" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "sh"
        args    = ["-c", "echo done"]
      }}
    }}
  }}
}}
"""


def gc_agent(root: Path, **client: str | int) -> AgentProcess:
    """An agent whose ``[client]`` table has ``client`` (values as TOML)."""
    table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in client.items())
    return AgentProcess(root, extra=f"[client]\n{table}")


def run_batch(agent: AgentProcess, name: str) -> str:
    """Submit a batch job and wait until it is complete (or collected already); its allocation's ID."""
    alloc_id = str(agent.submit(BATCH.format(name=name))["allocations"][0]["id"])

    def finished() -> bool:
        with agent.http() as http:
            response = http.get(f"/v1/allocations/{alloc_id}")
        return response.status_code == 404 or response.json()["tasks"]["t"]["state"] == "dead"

    wait_for(finished, what=f"job {name} complete")
    return alloc_id


def listed(agent: AgentProcess) -> tuple[set[str], set[str]]:
    """The job names and the allocation IDs the agent lists."""
    with agent.http() as http:
        jobs = {job["name"] for job in http.get("/v1/jobs").json()["jobs"]}
        allocs = {alloc["id"] for alloc in http.get("/v1/allocations").json()["allocations"]}
    return jobs, allocs


def stored(data_dir: Path) -> tuple[set[str], set[str]]:
    """The allocation IDs and job names in ``state.db`` (read only: the agent has it open)."""
    with sqlite3.connect(f"file:{data_dir / 'state.db'}?mode=ro", uri=True) as db:
        allocs = {row[0] for row in db.execute("SELECT id FROM allocs")}
        jobs = {row[0] for row in db.execute("SELECT name FROM jobs")}
    db.close()
    return allocs, jobs


def stored_final_at(data_dir: Path, alloc_id: str) -> float | None:
    """When the allocation's final status was stored (the time the collector counts from), None before."""
    with sqlite3.connect(f"file:{data_dir / 'state.db'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT status, updated_at FROM allocs WHERE id = ?", (alloc_id,)).fetchone()
    db.close()
    return None if row is None or row[0] in LIVE_STATUSES else float(row[1])


def alloc_dirs(data_dir: Path) -> set[str]:
    return {path.name for path in (data_dir / "allocs").iterdir()}


def test_over_gc_max_allocs_the_oldest_finished_go_and_a_running_one_stays(tmp_path: Path) -> None:
    agent = gc_agent(tmp_path, gc_max_allocs=2, gc_interval="200ms").start()
    try:
        running = agent.submit(ticker("service"))["allocations"][0]["id"]
        status = agent.wait_task(running, "t")
        finished = [run_batch(agent, f"batch-{n}") for n in range(4)]
        newest = finished[-1]

        # Two allocations are kept: the running one, and the finished one that finished last.
        def collected() -> bool:
            return alloc_dirs(agent.data_dir) == {running, newest}
        wait_for(collected, what=lambda: f"only {running} and {newest} in allocs/, not {alloc_dirs(agent.data_dir)}")
        assert listed(agent) == ({"service", "batch-3"}, {running, newest})
        assert stored(agent.data_dir) == ({running, newest}, {"service", "batch-3"})

        # The running task was never touched.
        assert agent.alloc(running)["tasks"]["t"]["state"] == "running"
        assert [e["type"] for e in agent.alloc(running)["tasks"]["t"]["events"]] == \
            [e["type"] for e in status["events"]]
        assert (agent.data_dir / "allocs" / running / "alloc" / "logs" / "t.stdout.0").read_text() == "started\n"
    finally:
        agent.shutdown()


def test_over_gc_disk_usage_threshold_every_finished_allocation_goes(tmp_path: Path) -> None:
    # Any filesystem is fuller than 0 %: only the disk's rule can collect, with gc_max_allocs out of reach.
    agent = gc_agent(tmp_path, gc_max_allocs=1000, gc_disk_usage_threshold=0, gc_interval="100ms").start()
    try:
        running = agent.submit(ticker("service"))["allocations"][0]["id"]
        agent.wait_task(running, "t")
        finished = [run_batch(agent, f"batch-{n}") for n in range(3)]
        wait_for(lambda: alloc_dirs(agent.data_dir) == {running},
                 what=lambda: f"only {running} in allocs/, not {alloc_dirs(agent.data_dir)}")
        assert listed(agent) == ({"service"}, {running})
        assert not set(finished) & stored(agent.data_dir)[0]
        assert agent.alloc(running)["tasks"]["t"]["state"] == "running"
    finally:
        agent.shutdown()


def finished_at(status: dict[str, Any]) -> float:
    """When an allocation's task terminated, by its event."""
    event = next(e for e in status["tasks"]["t"]["events"] if e["type"] == "Terminated")
    return datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()


def test_a_finished_job_is_purged_once_job_gc_threshold_has_passed(tmp_path: Path) -> None:
    agent = gc_agent(tmp_path, job_gc_threshold="3s", gc_interval="100ms").start()
    try:
        running = agent.submit(ticker("service"))["allocations"][0]["id"]
        agent.wait_task(running, "t")
        alloc_id = run_batch(agent, "short")
        ended = finished_at(agent.alloc(alloc_id))

        gone = wait_for(lambda: datetime.now().timestamp() if "short" not in listed(agent)[0] else None,
                        what="the finished job purged")
        assert gone - ended >= 3.0  # not before its time
        assert alloc_id not in alloc_dirs(agent.data_dir)
        assert stored(agent.data_dir) == ({running}, {"service"})
        assert agent.alloc(running)["tasks"]["t"]["state"] == "running"
    finally:
        agent.shutdown()


def child_document(tmp_path: Path, parent: str, number: int) -> dict[str, Any]:
    """The canonical document of a child of job ``parent``, as a launch makes it."""
    path = tmp_path / "child.hcl"
    path.write_text(BATCH.format(name="child"))
    _, source = app.evaluate_job(path, {})
    document: dict[str, Any] = json.loads(source.text)
    document["job"] |= {"name": f"{parent}/periodic-{1_700_000_000 + number}", "parent_id": parent}
    return document


def test_only_the_last_ten_finished_children_of_a_parent_are_kept(tmp_path: Path) -> None:
    agent = gc_agent(tmp_path).start()
    try:
        names = []
        for number in range(13):
            document = child_document(tmp_path, "nightly", number)
            with agent.http() as http:
                submitted = http.post("/v1/jobs", json={"job": document}).json()
            agent.wait_task(submitted["allocations"][0]["id"], "t", "dead")
            names.append(document["job"]["name"])
        alone = run_batch(agent, "standalone")  # its submission has the agent collect

        kept = {*names[3:], "standalone"}  # the oldest three children go
        wait_for(lambda: listed(agent)[0] == kept, what=lambda: f"jobs {sorted(kept)}, not {sorted(listed(agent)[0])}")
        allocs = listed(agent)[1]
        assert alone in allocs and len(allocs) == 11
        assert stored(agent.data_dir) == (allocs, kept)
        assert alloc_dirs(agent.data_dir) == allocs
    finally:
        agent.shutdown()


def test_herder_system_gc_collects_at_once(tmp_path: Path) -> None:
    agent = gc_agent(tmp_path, gc_interval="1h", job_gc_threshold="5s").start()  # no collection on its own
    try:
        alloc_id = run_batch(agent, "short")
        # The threshold counts from the allocation's final status, stored after its task ended.
        ended = wait_for(lambda: stored_final_at(agent.data_dir, alloc_id), what="the final status stored")
        wait_for(lambda: datetime.now().timestamp() > ended + 5, what="the job's threshold passed")
        assert "short" in listed(agent)[0]

        result = agent.cli("system", "gc")
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip() == "1 allocation(s) removed, 1 job(s) purged"
        assert listed(agent) == (set(), set())
        assert not alloc_dirs(agent.data_dir)
        with agent.http() as http:
            again = http.put("/v1/system/gc").json()
        assert again == {"message": "0 allocation(s) removed, 0 job(s) purged", "allocations": [], "jobs": []}
    finally:
        agent.shutdown()


def test_a_task_keeps_its_last_hundred_events_in_memory(tmp_path: Path) -> None:
    agent = gc_agent(tmp_path).start()
    try:
        alloc_id = agent.submit(ticker("signalled"))["allocations"][0]["id"]
        agent.wait_task(alloc_id, "t")
        with agent.http() as http:
            for _ in range(120):
                assert http.post(f"/v1/allocations/{alloc_id}/signal",
                                 json={"task": "t", "signal": "SIGCONT"}).status_code == 200
        agent.wait_event(alloc_id, "t", "Signaling", 100)
        events = agent.alloc(alloc_id)["tasks"]["t"]["events"]
        assert len(events) == 100
        assert {e["type"] for e in events} == {"Signaling"}  # Received, Task Setup and Started were dropped
    finally:
        agent.shutdown()


def test_gc_across_agent_kills_loses_nothing_live(tmp_path: Path) -> None:
    agent = gc_agent(tmp_path, gc_max_allocs=1000).start()
    try:
        running = [a["id"] for a in agent.submit(ticker("service", count=2))["allocations"]]
        for alloc_id in running:
            agent.wait_task(alloc_id, "t")
        pids = {pid for pid, cmd in processes_using(agent.data_dir).items() if "sleep 3600" in cmd}
        assert len(pids) == 2
        finished = [run_batch(agent, f"batch-{n}") for n in range(12)]
        agent.kill()

        # The next agents collect every finished allocation (2 are kept, both running): killed at once
        # after starting, the first may be in the middle of its first collection.
        agent.config.write_text(agent.config.read_text().replace("gc_max_allocs = 1000",
                                                                 'gc_max_allocs = 2\ngc_interval = "50ms"'))
        agent.start()
        agent.kill()
        agent.start()
        wait_for(lambda: alloc_dirs(agent.data_dir) == set(running),
                 what=lambda: f"only the running allocations in allocs/, not {alloc_dirs(agent.data_dir)}")
        assert stored(agent.data_dir)[0] == set(running)
        assert not set(finished) & listed(agent)[1]
        for alloc_id in running:
            status = agent.alloc(alloc_id)["tasks"]["t"]
            assert status["state"] == "running" and status["restarts"] == 0
            assert "Reattached" in [e["type"] for e in status["events"]]
        assert all(alive(pid) for pid in pids)
        assert {pid for pid, cmd in processes_using(agent.data_dir).items() if "sleep 3600" in cmd} == pids
        with sqlite3.connect(f"file:{agent.data_dir / 'state.db'}?mode=ro", uri=True) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        db.close()
    finally:
        agent.shutdown()
