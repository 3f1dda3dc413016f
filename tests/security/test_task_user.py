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


def checks(agent: AgentProcess, alloc_id: str) -> list[dict[str, str]]:
    return list(agent.alloc(alloc_id)["tasks"]["t"]["checks"])


def test_script_checks_and_alloc_exec_run_as_the_task_user(agent: AgentProcess) -> None:
    alloc_id = agent.submit(JOB)["allocations"][0]["id"]
    agent.wait_task(alloc_id, "t")

    exec_id = agent.cli("alloc", "exec", alloc_id, "t", "sh", "-c", 'echo "$(id -u) $(id -G) $HOME"')
    assert exec_id.returncode == 0, exec_id.stderr
    # Not root's uid, not root's groups, not root's home.
    assert exec_id.stdout.split() == [str(NOBODY.pw_uid), str(NOBODY.pw_gid), NOBODY.pw_dir]

    # The check passes only where it runs as nobody, with nobody's groups alone (as root: a warning).
    # It is critical until its first run, as in Consul.
    wait_for(lambda: [check["status"] for check in checks(agent, alloc_id)] == ["passing"], timeout=60,
             what=lambda: f"the script check to pass: {checks(agent, alloc_id)}")
