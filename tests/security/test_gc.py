"""A hostile task's leftovers when the garbage collector removes its allocation directory.

The task plants links to a host directory and a host file in its task
directory and in the shared ``alloc/data``, some at the bottom of a tree
deeper than the removal descends with open descriptors. The collector
removes the allocation directory as root: every link goes as a name, nothing
it pointed at is touched.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.processes import wait_until_gone
from tests.support.waiting import wait_for

PLANTER = """
job "planter" {
  type = "batch"
  group "g" {
    task "t" {
      driver = "raw_exec"
      user   = "nobody"
      restart {
        attempts = 0
        mode     = "fail"
      }
      config {
        command = "/bin/sh"
        args    = ["-c", <<EOT
set -e
ln -s "$VICTIM" "$NOMAD_TASK_DIR/escape"
ln -s "$VICTIM/precious" "$NOMAD_ALLOC_DIR/data/precious"
ln -s "$VICTIM" "$NOMAD_ALLOC_DIR/tmp/escape"
cd "$NOMAD_TASK_DIR"
i=0
while [ $i -lt 100 ]; do mkdir d; cd d; i=$((i+1)); done
ln -s "$VICTIM" escape
ln -s "$VICTIM/precious" precious
echo planted
EOT
        ]
      }
      env {
        VICTIM = "${victim}"
      }
    }
  }
}
"""


@pytest.fixture
def open_root() -> Iterator[Path]:
    """A directory nobody may pass through to reach its task directory (pytest's own are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="herder-gc-"))
    root.chmod(0o711)
    try:
        yield root
    finally:
        assert not wait_until_gone(root), "processes left behind"
        shutil.rmtree(root)


def test_collecting_an_allocation_never_follows_a_link_its_task_planted(tmp_path: Path, open_root: Path) -> None:
    victim = tmp_path / "victim"
    (victim / "inner").mkdir(parents=True)
    (victim / "precious").write_text("host data\n")
    (victim / "inner" / "file").write_text("more host data\n")
    agent = AgentProcess(open_root, extra='[client]\ngc_max_allocs = 0\ngc_interval = "100ms"\n')
    agent.start()
    try:
        submitted = agent.submit(PLANTER.replace("${victim}", str(victim)))
        alloc_id = submitted["allocations"][0]["id"]
        alloc_dir = agent.data_dir / "allocs" / alloc_id
        wait_for(lambda: not alloc_dir.exists(), what=f"{alloc_dir} collected")
        # The task planted everything (it exited 0 under `set -e`); its output went with its directory.
        assert "planter.g[0] t: Terminated Exit Code: 0" in agent.log.read_text()
        assert (victim / "precious").read_text() == "host data\n"
        assert (victim / "inner" / "file").read_text() == "more host data\n"
        assert sorted(p.name for p in victim.iterdir()) == ["inner", "precious"]
    finally:
        agent.shutdown()
