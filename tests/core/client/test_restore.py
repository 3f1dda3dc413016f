"""An allocation an earlier herder left running that the next one cannot restore."""

from __future__ import annotations

from pathlib import Path

from herder.state import Store
from tests.support.foreground import HerderRun, task_dirs
from tests.support.processes import alive, wait_until_gone
from tests.support.waiting import wait_for

JOB = """
job "j" {{
  group "g" {{
    task "side" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      lifecycle {{
        hook    = "prestart"
        sidecar = true
      }}
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo $$ >> {pids}; exec sleep 300"]
      }}
    }}
    task "main" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo $$ >> {pids}; exec sleep 300"]
      }}
    }}
    task "cleanup" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "poststop"
      }}
      config {{
        command = "/bin/true"
      }}
    }}
  }}
}}
"""


def test_its_running_tasks_are_killed_and_cleaned_up_and_its_tasks_yet_to_run_never_run(
        tmp_path: Path, config_file: Path) -> None:
    data_dir, pids = tmp_path / "data", tmp_path / "pids"
    path = tmp_path / "job.hcl"
    path.write_text(JOB.format(pids=pids))
    first = HerderRun(path, data_dir, "--keep", config=config_file)
    first.wait_for("Started", 2)

    def both_pids() -> list[int]:
        written = pids.read_text().split() if pids.exists() else []
        return [int(pid) for pid in written] if len(written) == 2 else []

    started = wait_for(both_pids, what="both tasks' pids")
    first.kill()
    # While no herder runs, a link where a directory of the task's should be.
    secrets = task_dirs(data_dir, "main")[0] / "secrets"
    secrets.rmdir()
    secrets.symlink_to(tmp_path)

    second = HerderRun(path, data_dir, "--keep", config=config_file)
    try:
        second.wait_for("Started", 2)
        assert second.of("Reattached") == []
        assert not any(alive(pid) for pid in started), "a task of the allocation not restored still runs"
    finally:
        assert second.interrupt() == 0, second.stderr
    assert not wait_until_gone(tmp_path)
    failed = secrets.parent.parent.name
    with Store(data_dir / "state.db") as store:
        alloc = store.alloc(failed)
        assert alloc is not None and alloc.status == "failed"
        types = {name: [event.type for _, event in store.events(failed, name)] for name in ("side", "main", "cleanup")}
        message = [event.message for _, event in store.events(failed, "main") if event.type == "Setup Failure"]
    for name in ("side", "main"):
        assert types[name][-4:] == ["Setup Failure", "Killing", "Terminated", "Killed"], types
    assert types["cleanup"] == ["Received", "Setup Failure"], types
    assert message == [f"the allocation cannot be restored: {secrets}: a link; not followed"]
