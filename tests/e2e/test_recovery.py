"""herder killed with SIGKILL: its tasks, their logs and the state database.

Every test runs ``herder run`` as a real process and kills it with SIGKILL,
the way a crash or the OOM killer would.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from herder.state import Store
from tests.support.foreground import HerderRun, task_dirs
from tests.support.processes import alive, wait_until_gone
from tests.support.waiting import wait_for

COUNTERS = """
job "counters" {
  group "g" {
    count = 10
    task "counter" {
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sh"
        args    = ["-c", "echo $$ > $NOMAD_TASK_DIR/pid; i=0; while :; do echo $i; i=$((i+1)); sleep 0.01; done"]
      }
    }
  }
}
"""


def write(tmp_path: Path, text: str) -> Path:
    job = tmp_path / "job.hcl"
    job.write_text(text)
    return job


def pids(data_dir: Path, task: str) -> list[int]:
    return [int((d / "local" / "pid").read_text()) for d in task_dirs(data_dir, task)]


def wait_for_pids(data_dir: Path, task: str, count: int) -> list[int]:
    def found() -> list[int]:
        try:
            written = pids(data_dir, task)
        except (OSError, ValueError):  # a pid file being written
            return []
        return written if len(written) == count else []
    return wait_for(found, what=f"{count} pid files of {task}")


def sizes(logs: list[Path]) -> list[int]:
    return [log.stat().st_size for log in logs]


def wait_for_growth(logs: list[Path], what: str) -> None:
    """Until every log has grown: its task runs and its output is still collected."""
    before = sizes(logs)
    wait_for(lambda: all(now > then for now, then in zip(sizes(logs), before, strict=True)), what=what)


def counted_lines(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().splitlines()]


def test_tasks_kept_across_a_kill_are_reattached_with_every_line_of_their_logs(tmp_path: Path) -> None:
    data_dir, job = tmp_path / "data", write(tmp_path, COUNTERS)
    first = HerderRun(job, data_dir, "--keep")
    first.wait_for("Started", 10)
    before = wait_for_pids(data_dir, "counter", 10)
    first.kill()

    # herder is gone; its tasks run on under the supervisor, and keep logging
    logs = [d.parent / "alloc" / "logs" / "counter.stdout.0" for d in task_dirs(data_dir, "counter")]
    wait_for_growth(logs, "the tasks to log on with herder gone")
    assert all(alive(pid) for pid in before)

    second = HerderRun(job, data_dir, "--keep")
    second.wait_for("Reattached", 10)
    assert second.of("Started") == [], "a task was started twice"
    assert pids(data_dir, "counter") == before
    wait_for_growth(logs, "the reattached tasks to log on")
    assert second.interrupt() == 0, second.stderr
    assert second.summary is not None and second.summary["status"] == "stopped"
    assert {task["restarts"] for alloc in second.summary["allocs"].values() for task in alloc["tasks"].values()} == {0}

    assert not any(alive(pid) for pid in before)
    for log in logs:
        lines = counted_lines(log)
        assert len(lines) > 50
        assert lines == list(range(len(lines))), f"{log}: a line was lost or repeated"


def test_a_task_that_exited_while_herder_was_down_is_seen_and_restarted_by_policy(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    job = write(tmp_path, """
        job "short" {
          group "g" {
            restart {
              attempts = 1
              delay    = "0s"
              interval = "1m"
              mode     = "fail"
            }
            task "t" {
              driver       = "raw_exec"
              kill_timeout = "1s"
              config {
                command = "/bin/sh"
                # the first run exits 3 once told to (by local/go, herder being down then; or after
                # 60 s); the restarted one stays up
                args    = ["-c", <<EOT
[ -e local/pid ] && exec sleep 60
echo $$ > local/pid
i=0; until [ -e local/go ] || [ $i -gt 1200 ]; do i=$((i+1)); sleep 0.05; done
exit 3
EOT
                ]
              }
            }
          }
        }
    """)
    first = HerderRun(job, data_dir, "--keep")
    first.wait_for("Started")
    [pid] = wait_for_pids(data_dir, "t", 1)
    first.kill()
    [task_dir] = task_dirs(data_dir, "t")
    (task_dir / "local" / "go").touch()
    wait_for(lambda: not alive(pid), what="the task to exit (with 3) while herder is down")

    second = HerderRun(job, data_dir, "--keep")
    [terminated] = second.wait_for("Terminated")
    assert terminated["details"]["exit_code"] == 3
    second.wait_for("Restarting")
    second.wait_for("Started")
    assert second.interrupt() == 0, second.stderr
    assert second.summary is not None
    [alloc] = second.summary["allocs"].values()
    assert alloc["tasks"]["t"]["restarts"] == 1


def test_a_killed_run_leaves_no_task_behind_and_the_next_run_starts_afresh(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    job = write(tmp_path, COUNTERS.replace("count = 10", "count = 2"))
    first = HerderRun(job, data_dir)
    first.wait_for("Started", 2)
    started = wait_for_pids(data_dir, "counter", 2)
    first.kill()

    # the supervisor stops the tasks of a run that died, and has them cleaned up
    wait_for(lambda: not any(alive(pid) for pid in started), timeout=30, what="the supervisor to stop the tasks")
    assert not wait_until_gone(data_dir, timeout=30)
    with Store(data_dir / "state.db") as store:
        assert store.allocs(live=True) == []
        assert {alloc.status for alloc in store.allocs()} == {"stopped"}

    second = HerderRun(job, data_dir)
    second.wait_for("Started", 2)
    assert second.of("Reattached") == []
    assert second.interrupt() == 0, second.stderr


@pytest.mark.slow
def test_the_state_database_survives_kills_at_random_points(tmp_path: Path, seed: int) -> None:
    data_dir = tmp_path / "data"
    job = write(tmp_path, """
        job "churn" {
          type = "batch"
          group "g" {
            count = 2
            restart {
              attempts = 2
              delay    = "0s"
              interval = "1m"
              mode     = "fail"
            }
            task "a" {
              driver = "raw_exec"
              config {
                command = "/bin/sh"
                args    = ["-c", "sleep 0.1; exit $(( $$ % 2 ))"]
              }
            }
            task "b" {
              driver = "raw_exec"
              config {
                command = "/bin/sh"
                args    = ["-c", "sleep 0.2"]
              }
            }
          }
        }
    """)
    rng = random.Random(seed)
    for _ in range(15):
        run = HerderRun(job, data_dir)
        time.sleep(rng.uniform(0.0, 1.2))  # deliberate sleep: the subject is a kill at a random point of the run
        run.kill()
    last = HerderRun(job, data_dir)
    assert last.finish() is not None and last.proc.returncode in (0, 1), last.stderr
    assert not wait_until_gone(data_dir, timeout=30)
    with Store(data_dir / "state.db") as store:
        assert store.integrity_check() == []
        assert store.allocs(live=True) == [], "an allocation of a dead herder was never cleaned up"
        for alloc in store.allocs():
            assert sorted(task.name for task in store.tasks(alloc.id)) == ["a", "b"]
            assert {task.state for task in store.tasks(alloc.id)} <= {"dead", "pending"}
