"""The agent with the docker driver: a container outlives a killed agent and is reattached."""

from __future__ import annotations

from pathlib import Path

from tests.support.agent import AgentProcess
from tests.support.http import read_url

from .helpers import Docker, containers_of

WEB = """
job "dweb" {
  group "g" {
    task "t" {
      driver = "docker"
      config {
        image    = "%s"
        command  = "sh"
        args     = ["-c", "echo hello > /local/index.html && exec httpd -f -p 8080 -h /local"]
        port_map = { http = 8080 }
      }
      resources {
        network {
          port "http" {}
        }
      }
      kill_timeout = "1s"
    }
  }
}
"""


def test_a_killed_agent_reattaches_its_container(docker_client: Docker, docker_driver: str, busybox_image: str,
                                                 tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path).start()
    alloc_id = ""
    try:
        alloc_id = agent.submit(WEB % busybox_image)["allocations"][0]["id"]
        agent.wait_task(alloc_id, "t")
        port = agent.alloc(alloc_id)["ports"][0]["value"]
        assert read_url(f"http://127.0.0.1:{port}/") == b"hello\n"
        [container] = containers_of(docker_client, alloc_id)

        agent.kill()
        agent.start()
        agent.wait_event(alloc_id, "t", "Reattached")
        status = agent.alloc(alloc_id)
        assert status["ports"][0]["value"] == port
        assert status["tasks"]["t"]["restarts"] == 0
        assert [c.id for c in containers_of(docker_client, alloc_id)] == [container.id]  # none started twice
        assert read_url(f"http://127.0.0.1:{port}/") == b"hello\n"
        executed = agent.cli("alloc", "exec", alloc_id[:8], "t", "--", "cat", "/local/index.html")
        assert executed.returncode == 0 and executed.stdout == "hello\n"
    finally:
        agent.shutdown()
        left = containers_of(docker_client, alloc_id) if alloc_id else []
        for container in left:
            container.remove(force=True)
    assert not left  # the agent's drain removed the container
