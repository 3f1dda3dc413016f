"""A task of another allocation, as ``nobody``, reads an allocation's logs and files by their path.

A raw_exec task with a ``user`` makes the data dir 0711, so that its process
can pass through to its task dir. Every allocation directory was 0711 too:
whoever knew an allocation's id (in the ``ps`` of any task given
``$NOMAD_TASK_DIR/...``) could read its logs and ``local`` files, as any user
of the host. Only the allocation whose process needs it is traversable; the
others stay 0700.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.processes import wait_until_gone

SECRET = "s3cret-of-alloc-a"
OWNER = f"""
job "owner" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo {SECRET}; echo {SECRET} > local/conf.txt"]
      }}
    }}
  }}
}}
"""
READER = """
job "reader" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      user   = "nobody"
      config {{
        command = "/bin/sh"
        args    = ["-c", "cat {alloc}/alloc/logs/t.stdout.0 {alloc}/t/local/conf.txt; echo done"]
      }}
    }}
  }}
}}
"""


@pytest.fixture
def agent() -> Iterator[AgentProcess]:
    root = Path(tempfile.mkdtemp(prefix="herder-alloc-modes-"))
    root.chmod(0o711)  # pytest's temporary directories are 0700: nobody could pass at all
    process = AgentProcess(root)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()
        assert not wait_until_gone(root), "processes left behind"
        shutil.rmtree(root)


def test_another_allocations_logs_and_files_are_out_of_a_nobody_tasks_reach(agent: AgentProcess) -> None:
    [owner] = agent.submit(OWNER)["allocations"]
    agent.wait_task(owner["id"], "t", "dead")
    owner_dir = agent.data_dir / "allocs" / owner["id"]
    [reader] = agent.submit(READER.format(alloc=owner_dir))["allocations"]
    agent.wait_task(reader["id"], "t", "dead")
    read = agent.cli("alloc", "logs", reader["id"], "t").stdout
    assert read.endswith("done\n") and SECRET not in read, read
    assert stat.S_IMODE(agent.data_dir.stat().st_mode) == 0o711  # the reader's own process passed through
    assert stat.S_IMODE(owner_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((agent.data_dir / "allocs" / reader["id"]).stat().st_mode) == 0o711
