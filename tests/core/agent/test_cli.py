"""``herder job`` and ``herder alloc`` as subprocesses against a real agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.consul import free_ports


@pytest.mark.slow
def test_job_and_alloc_commands(agent: AgentProcess, tmp_path: Path) -> None:
    job = tmp_path / "ticker.hcl"
    job.write_text(ticker("cli"))
    run = agent.cli("job", "run", str(job))
    assert run.returncode == 0, run.stderr
    assert "Job cli: running" in run.stderr

    status = json.loads(agent.cli("job", "status", "--json").stdout)
    [entry] = status["jobs"]
    assert entry["name"] == "cli" and entry["status"] == "running"
    alloc_id = entry["allocations"][0]["id"]
    assert "cli" in agent.cli("job", "status").stdout

    alloc = json.loads(agent.cli("alloc", "status", "--json", alloc_id[:5]).stdout)
    assert alloc["id"] == alloc_id and alloc["tasks"]["t"]["state"] == "running"
    assert "Task 't' (raw_exec) is running" in agent.cli("alloc", "status", alloc_id[:5]).stdout

    assert agent.cli("alloc", "logs", alloc_id[:5], "t").stdout == "started\n"
    assert agent.cli("alloc", "logs", "--stderr", alloc_id[:5], "t").stdout == "oops\n"

    executed = agent.cli("alloc", "exec", alloc_id[:5], "t", "--", "sh", "-c", "echo in $NOMAD_TASK_NAME; exit 4")
    assert executed.returncode == 4 and executed.stdout == "in t\n"

    assert agent.cli("alloc", "signal", "-s", "SIGHUP", alloc_id, "t").returncode == 0
    agent.wait_event(alloc_id, "t", "Signaling")
    assert agent.cli("alloc", "restart", alloc_id).returncode == 0
    agent.wait_event(alloc_id, "t", "Started", count=2)

    missing = agent.cli("alloc", "status", "nope")
    assert missing.returncode == 1 and "no allocation with ID prefix 'nope'" in missing.stderr

    stop = agent.cli("job", "stop", "cli")
    assert stop.returncode == 0, stop.stderr
    agent.wait_task(alloc_id, "t", "dead")


@pytest.mark.slow
def test_job_run_shows_a_failure_and_an_invalid_job(agent: AgentProcess, tmp_path: Path) -> None:
    failing = tmp_path / "fail.hcl"
    failing.write_text('job "fail" {\n type = "batch"\n group "g" {\n  restart {\n   attempts = 0\n'
                       '   mode = "fail"\n  }\n  task "t" {\n   driver = "raw_exec"\n   config {\n'
                       '    command = "false"\n   }\n  }\n }\n}\n')
    run = agent.cli("job", "run", str(failing))
    assert run.returncode == 1, run.stderr
    assert "Job fail: failed" in run.stderr
    assert "fail.g[0] t failed: Not Restarting" in run.stderr

    invalid = tmp_path / "invalid.hcl"
    invalid.write_text('job "x" {\n group "g" {\n  task "t" {\n   driver = "raw_exec"\n   config {}\n  }\n }\n}\n')
    refused = agent.cli("job", "run", str(invalid))
    assert refused.returncode == 2
    assert "invalid.hcl:5: job.groups[0].tasks[0].config.command: is required" in refused.stderr
    undeclared = agent.cli("job", "run", "--var", "a=b", str(invalid))
    assert undeclared.returncode == 2 and "variable 'a' is given a value" in undeclared.stderr


@pytest.mark.parametrize(("command", "code", "status"), [("/bin/true", 0, "complete"), ("/bin/false", 1, "failed")])
def test_job_run_follows_a_batch_job_that_ends_at_once(agent: AgentProcess, tmp_path: Path, command: str,
                                                       code: int, status: str) -> None:
    """A task that exits in milliseconds has ended before the command follows the stream: it reads
    from the submission's index, and ends with the status the client gave the allocation."""
    job = tmp_path / "quick.hcl"
    job.write_text(f'job "quick" {{\n type = "batch"\n group "g" {{\n  restart {{\n   attempts = 0\n'
                   f'   mode = "fail"\n  }}\n  task "t" {{\n   driver = "raw_exec"\n   config {{\n'
                   f'    command = "{command}"\n   }}\n  }}\n }}\n}}\n')
    run = agent.cli("job", "run", str(job), timeout=30.0)
    assert run.returncode == code, run.stderr
    assert f"Job quick: {status}" in run.stderr
    assert "Terminated" in run.stdout  # the task's events, though they came before the stream was read


def test_an_unreachable_agent_is_one_clear_line(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path)  # never started
    [port] = free_ports(1)
    result = agent.cli("job", "status", addr=f"http://127.0.0.1:{port}")
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: cannot reach the herder agent at http://127.0.0.1:{port}")
    assert "Traceback" not in result.stderr


def test_a_ca_bundle_that_cannot_be_loaded_is_one_clear_line(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path)  # never started: the bundle is read first
    (tmp_path / "not-a-ca.pem").write_text("hello\n")
    for bundle in (tmp_path / "missing.pem", tmp_path / "not-a-ca.pem"):
        result = agent.cli("job", "status", env={"HERDER_CACERT": str(bundle)})
        assert result.returncode == 1
        assert result.stderr.startswith(f"Error: HERDER_CACERT {bundle}: cannot load a CA bundle")
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_alloc_logs_follows_until_the_task_is_dead(agent: AgentProcess) -> None:
    alloc_id = agent.submit(ticker("follow"))["allocations"][0]["id"]
    agent.wait_task(alloc_id, "t")
    environ = {**os.environ, "HERDER_ADDR": agent.url, "HERDER_TOKEN": agent.token}
    with subprocess.Popen([sys.executable, "-m", "herder", "alloc", "logs", "-f", alloc_id[:8], "t"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ) as follower:
        assert follower.stdout is not None
        assert follower.stdout.readline() == b"started\n"  # streamed while the task runs
        assert agent.cli("job", "stop", "follow").returncode == 0
        out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    assert out == b""
