"""``herder run`` in the foreground reschedules a failed allocation as the agent does, and follows
the replacement to its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.foreground import HerderRun

pytestmark = pytest.mark.slow

BATCH = """
job "third-time" {
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts = 2
      interval = "1h"
      delay    = "200ms"
    }
    ephemeral_disk {
      sticky = true
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "sh"
        args    = ["-c", "cd $NOMAD_ALLOC_DIR/data; echo run >> runs; wc -l < runs; test $(wc -l < runs) -ge 3"]
      }
    }
  }
}
"""


def test_a_foreground_run_follows_its_replacements_to_the_end(tmp_path: Path, config_file: Path) -> None:
    job = tmp_path / "job.hcl"
    job.write_text(BATCH)
    run = HerderRun(job, tmp_path / "data", config=config_file)
    stderr = run.finish()
    assert run.proc.returncode == 0, stderr
    assert run.summary is not None and run.summary["status"] == "complete"
    allocs = list(run.summary["allocs"].values())
    assert [a["tasks"]["t"]["exit_code"] for a in allocs] == [1, 1, 0]  # the third run found two before it
    assert stderr.count("failed: rescheduled as") == 2
    assert len(run.of("Alloc Data Moved")) == 2


def test_logs_follow_the_replacements_too(tmp_path: Path, config_file: Path) -> None:
    job = tmp_path / "job.hcl"
    job.write_text(BATCH)
    run = subprocess.run([sys.executable, "-m", "herder", "run", "--logs", "--config", str(config_file),
                          "--data-dir", str(tmp_path / "data"), str(job)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stdout.splitlines() if " | " in line]
    assert lines == [f"third-time.g[0] t | {n}" for n in (1, 2, 3)]
