"""herder on a data dir whose disk fills up: the state database cannot be written.

The data dir is a small tmpfs of its own, filled by the test once the tasks
run; a task ending then makes herder write its state. herder must neither
hang nor die of a traceback: a foreground run stops its tasks (or keeps them
under ``--keep``) and exits 1; an agent keeps its tasks, and carries on once
there is room again.
"""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.agent import AgentProcess
from tests.support.disk import fill, small_disk
from tests.support.foreground import HerderRun
from tests.support.processes import alive, wait_until_gone
from tests.support.waiting import wait_for

FULL = "database or disk is full"

JOB = """
job "filled" {{
  type = "batch"
  group "g" {{
    ephemeral_disk {{ size = 1 }}  # MB: placement checks it against the small disk's free space
    task "sleeper" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo $$ > local/pid; exec sleep 3600"]
      }}
    }}
    task "trigger" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        # ends (and herder writes that down) once the test has filled the disk
        args    = ["-c", "while [ ! -e {go} ]; do sleep 0.05; done"]
      }}
    }}
  }}
}}
"""

LATER = """
job "later" {
  group "g" {
    ephemeral_disk { size = 0 }  # asks no room: what refuses it on the full disk is its state not being written
    task "t" {
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }
    }
  }
}
"""


def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "job.hcl"
    path.write_text(JOB.format(go=tmp_path / "go"))
    return path


def sleeper_pid(data_dir: Path) -> int:
    return wait_for(lambda: next((int(text) for path in (data_dir / "allocs").glob("*/sleeper/local/pid")
                                  if (text := path.read_text().strip())), 0), what="the sleeper's pid")


def fill_and_trigger(tmp_path: Path, data_dir: Path) -> Path:
    filler = fill(data_dir)
    (tmp_path / "go").touch()
    return filler


def assert_told_in_one_line(output: str) -> None:
    assert "Traceback" not in output, output
    assert any(FULL in line and "cannot write the state" in line for line in output.splitlines()), output


def test_a_run_that_cannot_write_its_state_stops_its_tasks_and_fails(tmp_path: Path) -> None:
    with small_disk(tmp_path / "data") as data_dir:
        run = HerderRun(job_file(tmp_path), data_dir)
        try:
            run.wait_for("Started", 2)
            pid = sleeper_pid(data_dir)
            fill_and_trigger(tmp_path, data_dir)
            stderr = run.finish(timeout=120)
        finally:
            run.finish(kill=True)
        assert run.proc.returncode == 1, stderr
        assert_told_in_one_line(stderr)
        assert [event["task"] for event in run.of("State Write Failed")] == ["sleeper"]
        assert run.of("Killed"), "the sleeper was not stopped"
        assert not alive(pid)
        assert run.summary is not None and run.summary["status"] == "failed"
        assert not wait_until_gone(data_dir, timeout=30)


def test_a_kept_run_keeps_its_tasks_and_a_sigterm_still_stops_it(tmp_path: Path) -> None:
    with small_disk(tmp_path / "data") as data_dir:
        run = HerderRun(job_file(tmp_path), data_dir, "--keep")
        try:
            run.wait_for("Started", 2)
            pid = sleeper_pid(data_dir)
            fill_and_trigger(tmp_path, data_dir)
            run.wait_for("State Write Failed")
            assert alive(pid) and run.of("Killing") == []  # kept
            run.proc.send_signal(signal.SIGTERM)
            stderr = run.finish(timeout=120)
        finally:
            run.finish(kill=True)
        assert run.proc.returncode == 1, stderr  # what the run did could not be saved
        assert_told_in_one_line(stderr)
        assert not alive(pid)
        assert not wait_until_gone(data_dir, timeout=30)


def task_states(db: Path) -> dict[str, str]:
    """Task name -> state, as committed to the database (read by a connection of the test's)."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return dict(connection.execute("SELECT name, state FROM tasks").fetchall())


@dataclass
class FullAgent:
    """An agent whose disk filled up while its ``sleeper`` ran."""

    agent: AgentProcess
    data_dir: Path
    alloc_id: str
    sleeper: int
    filler: Path


@contextmanager
def agent_on_a_full_disk(tmp_path: Path) -> Iterator[FullAgent]:
    """An agent running the job on a small disk, filled once the sleeper runs, until it said so;
    shut down at the end (started again on the data dir: it reattaches the sleeper, and stops it)."""
    with small_disk(tmp_path / "data") as data_dir:
        agent = AgentProcess(tmp_path)
        agent.start()
        try:
            [alloc] = agent.submit(JOB.format(go=tmp_path / "go"))["allocations"]
            agent.wait_task(alloc["id"], "sleeper")
            pid = sleeper_pid(data_dir)
            filler = fill_and_trigger(tmp_path, data_dir)
            agent.wait_event(alloc["id"], "sleeper", "State Write Failed", timeout=60)
            yield FullAgent(agent, data_dir, alloc["id"], pid, filler)
        finally:
            agent.shutdown()
        assert not wait_until_gone(data_dir, timeout=30)


def test_an_agent_keeps_its_tasks_on_a_full_disk_and_carries_on_once_there_is_room(tmp_path: Path) -> None:
    with agent_on_a_full_disk(tmp_path) as full:
        agent = full.agent
        assert agent.alloc(full.alloc_id)["tasks"]["sleeper"]["state"] == "running"
        assert alive(full.sleeper)
        with agent.http() as http:  # a job it cannot record is refused
            refused = http.post("/v1/jobs", json={"text": LATER, "format": "hcl"})
        assert refused.status_code == 409 and FULL in refused.json()["error"], refused.text

        full.filler.unlink()
        [later] = agent.submit(LATER)["allocations"]  # the agent carries on
        agent.wait_task(later["id"], "t")
        # what happened while the disk was full is written too
        wait_for(lambda: task_states(full.data_dir / "state.db") == {"sleeper": "running", "trigger": "dead",
                                                                      "t": "running"},
                 what="the state database to be written again")
        log = agent.log.read_text()
        assert_told_in_one_line(log)
        assert "the state is written again" in log


def test_an_agent_on_a_full_disk_still_exits_on_sigterm(tmp_path: Path) -> None:
    with agent_on_a_full_disk(tmp_path) as full:
        assert full.agent.terminate(timeout=60) == 1  # what happened meanwhile is not saved
        assert alive(full.sleeper)  # its tasks outlive it, as always
        log = full.agent.log.read_text()
        assert_told_in_one_line(log)
        assert "internal error" not in log
        full.filler.unlink()
