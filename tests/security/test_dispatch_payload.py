"""A task plants links where herder (root) writes its dispatch payload (SPEC §14, §15).

herder writes a dispatched job's payload into ``local/``, which the task can
write; a task restarted by its policy gets the payload written again, over
what its earlier run left there. A first run plants a link (``local/in`` to a
host directory, or ``local/in/data.txt`` to a host file) and fails; on the
restart nothing of the host is written, the task is told why when the link
is in the way, and herder goes on. A job naming a payload file outside
``local/`` (``../``) is refused when submitted.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from tests.support.agent import AgentProcess

JOB = """
job "{name}" {{
  type = "batch"
  parameterized {{}}
  group "g" {{
    restart {{
      attempts = 1
      delay    = "100ms"
      mode     = "fail"
    }}
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", <<-EOS
          if [ -e local/planted ]; then cat local/in/data.txt; exit 0; fi
          touch local/planted
          {plant}
          exit 1
          EOS
        ]
      }}
      dispatch_payload {{
        file = "{file}"
      }}
    }}
  }}
}}
"""


@pytest.fixture
def agent(shared_agent: AgentProcess) -> AgentProcess:
    return shared_agent


def dispatched_task(agent: AgentProcess, name: str, plant: str, payload: bytes) -> dict[str, Any]:
    """The task of the child of job ``name`` (which plants ``plant`` on its first run), once it is done."""
    agent.submit(JOB.format(name=name, plant=plant, file="in/data.txt"))
    with agent.http() as http:
        answer = http.post(f"/v1/jobs/{name}/dispatch", json={"payload": base64.b64encode(payload).decode()})
    assert answer.status_code == 200, answer.text
    [alloc] = answer.json()["allocations"]
    agent.wait_event(alloc["id"], "t", "Not Restarting")
    return agent.wait_task(alloc["id"], "t", "dead")


def test_a_link_planted_for_the_payload_directory_is_not_followed(agent: AgentProcess, tmp_path: Path) -> None:
    host_dir = tmp_path / "host"
    host_dir.mkdir()
    task = dispatched_task(agent, "dir-link", f"rm -rf local/in; ln -s {host_dir} local/in", b"PAYLOAD")
    assert list(host_dir.iterdir()) == []  # root wrote nothing through the link
    failures = [e["message"] for e in task["events"] if e["type"] == "Setup Failure"]
    assert failures and "local/in: a link; not followed" in failures[-1], task["events"]
    assert task["failed"]


def test_a_link_planted_for_the_payload_file_is_replaced_not_followed(agent: AgentProcess, tmp_path: Path) -> None:
    host_file = tmp_path / "host-file"
    host_file.write_text("HOST")
    task = dispatched_task(agent, "file-link", f"ln -sf {host_file} local/in/data.txt", b"PAYLOAD")
    assert host_file.read_text() == "HOST"
    assert not task["failed"] and task["exit_code"] == 0  # the second run read the payload, not the host's file
    with agent.http() as http:
        [alloc] = [a for a in http.get("/v1/allocations").json()["allocations"] if a["job"].startswith("file-link/")]
    assert agent.cli("alloc", "logs", alloc["id"], "t").stdout == "PAYLOAD"


@pytest.mark.parametrize("file", ["../secrets/token", "../../alloc/data/x", "/etc/cron.d/owned", "in/../../x"])
def test_a_payload_file_outside_local_is_refused_by_the_agent(agent: AgentProcess, file: str) -> None:
    with agent.http() as http:
        answer = http.post("/v1/jobs", json={"text": JOB.format(name="escape", plant="", file=file), "format": "hcl"})
        assert answer.status_code == 400, answer.text
        assert any("dispatch_payload.file" in error and "local/" in error for error in answer.json()["errors"])
        assert http.get("/v1/jobs/escape").status_code == 404
