"""Ceilings on what a job may ask of the client.

A job author asks for a ``shutdown_delay`` of 9999 hours: stopping the task
must not hold the agent (a later submission waits for nobody) and ends
within ``[client] max_kill_timeout``. A job author asks for a million
allocations or log files: the job is refused, naming the setting.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess

MAX_KILL_TIMEOUT = 2.0

SLEEPER = """
job "%(name)s" {
  group "g" {
    task "t" {
      driver         = "raw_exec"
      shutdown_delay = "9999h"
      kill_timeout   = "9999h"
      config {
        command = "sh"
        args    = ["-c", "trap '' INT TERM; echo %(word)s; while :; do sleep 1; done"]
      }
    }
  }
}
"""


def sleeper(name: str, word: str = "hello") -> str:
    """A task that ignores the stop signal, with the longest shutdown_delay and kill_timeout one can write."""
    return SLEEPER % {"name": name, "word": word}


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path, extra=f'[client]\nmax_kill_timeout = "{MAX_KILL_TIMEOUT:g}s"\n')
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def test_a_long_shutdown_delay_holds_up_no_other_job_and_is_capped(agent: AgentProcess) -> None:
    first = agent.submit(sleeper("slow"))["allocations"][0]["id"]
    agent.wait_task(first, "t")

    # A new version of the job stops the old one, which waits out its (capped) delays meanwhile ...
    agent.submit(sleeper("slow", word="again"))
    replacement = agent.replacement("slow", first)
    # ... while another job is taken and started at once.
    other = agent.submit(sleeper("other"))["allocations"][0]["id"]
    agent.wait_task(other, "t")

    # The old version dies within the ceiling (the bound here is generous; 9999h is the alternative).
    agent.wait_task(first, "t", "dead")
    agent.wait_task(replacement, "t")
    killing = [e for e in agent.alloc(first)["tasks"]["t"]["events"] if e["type"] == "Killing"]
    assert killing[0]["details"]["kill_timeout"] == MAX_KILL_TIMEOUT
    assert killing[0]["details"]["requested_shutdown_delay"] == 9999 * 3600
    assert killing[0]["details"]["max_kill_timeout"] == MAX_KILL_TIMEOUT

    with agent.http() as http:
        for job in ("slow", "other"):
            assert http.delete(f"/v1/jobs/{job}").status_code == 200
    agent.wait_task(replacement, "t", "dead")
    agent.wait_task(other, "t", "dead")


@pytest.mark.parametrize(("stanza", "path", "limit"), [
    ("count = 100000", "job.groups[0].count", 1000),
    ("task \"t\" {\n logs {\n max_files = 100000\n }\n", "job.groups[0].tasks[0].logs.max_files", 100),
    ("task \"t\" {\n logs {\n max_file_size = 1000000\n }\n", "job.groups[0].tasks[0].logs.max_file_size", 1024),
])
def test_counts_beyond_the_ceilings_are_refused(agent: AgentProcess, stanza: str, path: str, limit: int) -> None:
    text = sleeper("many")
    if stanza.startswith("count"):
        text = text.replace('group "g" {', f'group "g" {{\n    {stanza}')
    else:
        text = text.replace('task "t" {\n', stanza)
    with agent.http() as http:
        response = http.post("/v1/jobs", json={"text": text, "format": "hcl"})
        assert response.status_code == 400, response.text
        assert any(path in error and str(limit) in error for error in response.json()["errors"]), response.json()
        assert http.get("/v1/allocations").json()["allocations"] == []
