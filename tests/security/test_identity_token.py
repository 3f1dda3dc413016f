"""A task plants links where herder (root) writes its workload identity token (SPEC §14, §20).

herder writes the token into the task's ``secrets/`` (or where ``filepath`` says), which the task can
write; a task restarted by its policy gets a token written again, over what its earlier run left
there. A first run plants a link where the token goes (to a host file, or to a host directory where
``filepath`` says) and fails; on the restart nothing of the host is written: the link is replaced by
the token, never followed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import AgentProcess

JOB = """
job "{name}" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 1
      delay    = "100ms"
      mode     = "fail"
    }}
    task "t" {{
      driver = "raw_exec"
      user   = "nobody"
      identity {{
        name     = "db"
        aud      = ["db"]
        file     = true
        {filepath}
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", <<-EOS
          if [ -e local/planted ]; then exit 0; fi
          touch local/planted
          {plant}
          exit 1
          EOS
        ]
      }}
    }}
  }}
}}
"""


@pytest.fixture
def agent(shared_agent: AgentProcess) -> AgentProcess:
    return shared_agent


def finished_task(agent: AgentProcess, name: str, plant: str, filepath: str = "") -> tuple[str, dict[str, Any]]:
    """The allocation of job ``name`` (whose task plants ``plant`` on its first run), and its task once done."""
    placed = agent.submit(JOB.format(name=name, plant=plant, filepath=filepath))
    alloc_id = placed["allocations"][0]["id"]
    agent.wait_event(alloc_id, "t", "Started")
    return alloc_id, agent.wait_task(alloc_id, "t", "dead")


def test_a_link_planted_for_the_token_file_is_replaced_not_followed(agent: AgentProcess, tmp_path: Path) -> None:
    host_file = tmp_path / "host-file"
    host_file.write_text("HOST")
    host_file.chmod(0o666)  # writable by anyone: only herder's refusal to follow keeps it
    alloc_id, task = finished_task(agent, "token-link", f"ln -sf {host_file} secrets/nomad_db.jwt")
    assert host_file.read_text() == "HOST"
    assert not task["failed"] and task["exit_code"] == 0, task["events"]
    token = agent.data_dir / "allocs" / alloc_id / "t" / "secrets" / "nomad_db.jwt"
    assert not token.is_symlink() and token.read_text().count(".") == 2  # a JWT, where the link was


def test_a_link_planted_at_the_filepath_is_replaced_not_followed(agent: AgentProcess, tmp_path: Path) -> None:
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    host_dir.chmod(0o777)  # writable by anyone: only herder's refusal to follow keeps it empty
    alloc_id, task = finished_task(agent, "token-path-link", f"ln -sfn {host_dir} local/db.jwt",
                                   filepath='filepath = "local/db.jwt"')
    assert list(host_dir.iterdir()) == []
    assert not task["failed"] and task["exit_code"] == 0, task["events"]
    token = agent.data_dir / "allocs" / alloc_id / "t" / "local" / "db.jwt"
    assert not token.is_symlink() and token.read_text().count(".") == 2
