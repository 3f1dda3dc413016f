"""A task's ``user`` holds for what herder runs on its behalf: a task of ``user = "nobody"`` whose
script check or ``herder alloc exec`` ran as root would hand root to whoever writes the job."""

from __future__ import annotations

import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

NOBODY = pwd.getpwnam("nobody")

JOB = """
job "whoami" {
  group "g" {
    task "t" {
      driver       = "raw_exec"
      user         = "nobody"
      kill_timeout = "5s"
      config {
        command = "sleep"
        args    = ["3600"]
      }
      service {
        name = "whoami"
        check {
          name     = "as-nobody"
          type     = "script"
          command  = "/bin/sh"
          args     = ["-c", "test \\"$(id -u):$(id -G)\\" = \\"NOBODY\\""]
          interval = "1s"
          timeout  = "10s"
        }
      }
    }
  }
}
""".replace("NOBODY", f"{NOBODY.pw_uid}:{NOBODY.pw_gid}")


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path)  # raw_exec enabled
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def check_result(agent: AgentProcess, alloc_id: str) -> str:
    """The script check's status once it has run ("" before)."""
    checks = agent.alloc(alloc_id)["tasks"]["t"]["checks"]
    status = str(checks[0]["status"]) if checks else ""
    return "" if status == "pending" else status


def test_script_checks_and_alloc_exec_run_as_the_task_user(agent: AgentProcess) -> None:
    alloc_id = agent.submit(JOB)["allocations"][0]["id"]
    agent.wait_task(alloc_id, "t")

    exec_id = agent.cli("alloc", "exec", alloc_id, "t", "sh", "-c", 'echo "$(id -u) $(id -G) $HOME"')
    assert exec_id.returncode == 0, exec_id.stderr
    # Not root's uid, not root's groups, not root's home.
    assert exec_id.stdout.split() == [str(NOBODY.pw_uid), str(NOBODY.pw_gid), NOBODY.pw_dir]

    # The check passes only where it runs as nobody, with nobody's groups alone.
    status = wait_for(lambda: check_result(agent, alloc_id), timeout=60, what="the script check's first result")
    assert status == "passing"
