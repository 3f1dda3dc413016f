"""A hostile task's ``alloc/data`` when its allocation is replaced (``ephemeral_disk { sticky = true }``).

The task swaps the shared ``alloc/data`` for a link to a host directory, then
fails. The agent moves the failed allocation's ``alloc/data`` into the
replacement through directory descriptors: a link there is not a directory,
so nothing is moved; the replacement starts with its own empty directory, is
told why, and the host directory stays out of every allocation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

SWAPPER = """
job "swapper" {
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts       = 1
      interval       = "1h"
      delay          = "100ms"
      delay_function = "constant"
      unlimited      = false
    }
    ephemeral_disk {
      sticky = true
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        # Only the first run swaps (it disarms the next): the replacement shows what it was given.
        args    = ["-c", "cd $NOMAD_ALLOC_DIR && rm $VICTIM.armed && rmdir data && ln -s $VICTIM data; exit 1"]
      }
      env {
        VICTIM = "%s"
      }
    }
  }
}
"""


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[AgentProcess]:
    (tmp_path / "agent").mkdir()
    process = AgentProcess(tmp_path / "agent")
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def test_a_link_left_at_alloc_data_is_not_carried_into_the_replacement(agent: AgentProcess, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("keep me")
    (tmp_path / "victim.armed").touch()
    first = agent.submit(SWAPPER % victim)["allocations"][0]["id"]

    def replacement() -> str:
        return str(agent.alloc(first)["next_allocation"])

    second = wait_for(replacement, what="the replacement placed")
    agent.wait_event(second, "t", "Alloc Data Not Moved")
    refused = [e for e in agent.alloc(second)["tasks"]["t"]["events"] if e["type"] == "Alloc Data Not Moved"]
    assert "not a directory" in refused[0]["message"]
    data = agent.data_dir / "allocs" / second / "alloc" / "data"
    assert data.is_dir() and not data.is_symlink()
    assert sorted(victim.iterdir()) == [victim / "precious"]
    assert (victim / "precious").read_text() == "keep me"
    assert (agent.data_dir / "allocs" / first / "alloc" / "data").is_symlink()  # left where the task put it


SPOILER = """
job "spoiler" {
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts       = 1
      interval       = "1h"
      delay          = "100ms"
      delay_function = "constant"
      unlimited      = false
    }
    ephemeral_disk {
      sticky = true
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/sh"
        # Root in a container is root over its alloc dir; the first run (only) spoils the data dir's mode.
        args    = ["-c", "cd $NOMAD_ALLOC_DIR && rm $ARMED && chown 65534:65534 data && chmod 0700 data && exit 1; %s"]
      }
      env {
        ARMED = "%s"
      }
    }
  }
}
"""


def test_a_carried_alloc_data_gets_its_mode_and_owner_back(agent: AgentProcess, tmp_path: Path) -> None:
    """A task of the first allocation makes ``alloc/data`` 0700 and another user's, then fails: its
    replacement, whose tasks (of any user) share it, was given it so, not the 1777 root's of every
    allocation."""
    armed = tmp_path / "armed"
    armed.touch()
    first = agent.submit(SPOILER % ("exec sleep 3600", armed))["allocations"][0]["id"]
    second = wait_for(lambda: str(agent.alloc(first)["next_allocation"]), what="the replacement placed")
    agent.wait_event(second, "t", "Alloc Data Moved")
    agent.wait_task(second, "t")
    data = (agent.data_dir / "allocs" / second / "alloc" / "data").stat()
    assert (oct(data.st_mode & 0o7777), data.st_uid, data.st_gid) == (oct(0o1777), 0, 0)
