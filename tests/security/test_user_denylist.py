"""``[client] user_denylist``: a job author asks exec, java or qemu to run the task as root, and so would
get root on the host. The job fails placement, naming the user and the setting; an operator who
empties the list allows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.require import require_driver

CONFIGS = {
    "exec": 'command = "/bin/sh"\n        args = ["-c", "id -u"]',
    "java": 'jar_path = "local/app.jar"',
    "qemu": 'image_path = "local/disk.img"',
}


def job(driver: str) -> str:
    return f"""
job "as-root" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "{driver}"
      user   = "root"
      config {{
        {CONFIGS[driver]}
      }}
    }}
  }}
}}
"""


@pytest.mark.parametrize("driver", ["exec", "java", "qemu"])
def test_a_denied_user_fails_placement(driver: str, tmp_path: Path) -> None:
    require_driver(driver)
    agent = AgentProcess(tmp_path).start()
    try:
        with agent.http() as http:
            response = http.post("/v1/jobs", json={"text": job(driver), "format": "hcl"})
            assert response.status_code == 409, response.text
            assert (f'task "t": user "root" is denied for driver {driver} by [client] user_denylist'
                    in response.json()["error"])
            assert http.get("/v1/allocations").json()["allocations"] == []
    finally:
        agent.shutdown()


def test_an_empty_denylist_allows_root(tmp_path: Path) -> None:
    require_driver("exec")
    agent = AgentProcess(tmp_path, extra="[client]\nuser_denylist = []\n").start()
    try:
        alloc_id = agent.submit(job("exec"))["allocations"][0]["id"]
        agent.wait_task(alloc_id, "t", "dead", timeout=60)
        with agent.http() as http:
            assert http.get(f"/v1/allocations/{alloc_id}/logs/t").content == b"0\n"
    finally:
        agent.shutdown()
