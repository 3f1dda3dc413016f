"""Task ``lifecycle`` (prestart, poststart, poststop, sidecars) with real raw_exec processes.

The tasks leave marks in files, so the order is checked both by the events
herder records and by what the processes themselves saw of each other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.foreground import HerderRun
from tests.support.processes import alive
from tests.support.running import Run, run_job, start_job
from tests.support.waiting import SH_WAIT_FOR, wait_for, wait_for_text

NO_RESTARTS = 'restart {\n attempts = 0\n mode = "fail"\n }'


def job(tasks: str, *, type: str = "batch", restart: str = "") -> str:
    return f'job "j" {{\n type = "{type}"\n group "g" {{\n {restart}\n {tasks}\n }}\n}}\n'


def task(name: str, script: str, *, hook: str = "", sidecar: bool = False, extra: str = "") -> str:
    """A raw_exec task running ``script`` with /bin/sh; ``hook`` gives it a lifecycle block."""
    script = script.replace("\\", "\\\\").replace('"', '\\"')
    lifecycle = f'lifecycle {{\n hook = "{hook}"\n sidecar = {str(sidecar).lower()}\n }}' if hook else ""
    return (f'task "{name}" {{\n driver = "raw_exec"\n kill_timeout = "2s"\n {lifecycle}\n {extra}\n'
            f' config {{\n command = "/bin/sh"\n args = ["-c", "{script}"]\n }}\n }}\n')


def index(run: Run, type: str, task: str) -> int:
    """The position of the first ``type`` event of ``task`` among all the run's events."""
    for position, record in enumerate(run.events):
        if record.event.type == type and record.task == task:
            return position
    raise AssertionError(f"no {type!r} event of {task}: {[(r.task, r.event.type) for r in run.events]}")


def test_a_prestart_task_completes_before_the_main_task_starts(data_dir: Path, tmp_path: Path) -> None:
    mark = tmp_path / "prepared"
    # The prestart task's sleep only widens the window in which a main task started too early
    # would find no mark: it can make a defect show, never fail a correct herder.
    text = job(task("init", f"sleep 0.3; echo ok > {mark}", hook="prestart")
               + task("main", f"test -s {mark}"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    assert index(run, "Terminated", "init") < index(run, "Started", "main")
    assert run.types("init").count("Started") == 1


def test_a_prestart_sidecar_runs_before_and_beside_the_main_task_and_is_killed_after_it(
        data_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "sidecar.pid"
    text = job(task("proxy", f"echo $$ > {pid_file}; exec sleep 300", hook="prestart", sidecar=True)
               + task("main", f"{SH_WAIT_FOR} {pid_file} && kill -0 $(cat {pid_file})"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    assert index(run, "Started", "proxy") < index(run, "Started", "main")
    assert index(run, "Terminated", "main") < index(run, "Main Tasks Dead", "proxy")
    assert run.types("proxy")[-4:] == ["Main Tasks Dead", "Killing", "Terminated", "Killed"]
    assert not alive(int(pid_file.read_text()))


def test_a_poststart_task_starts_once_the_main_task_runs(data_dir: Path, tmp_path: Path) -> None:
    pid_file, mark = tmp_path / "main.pid", tmp_path / "announced"
    # The poststart task records whether the main task's process was alive when it ran; the
    # main task waits for that mark, so it outlives it. The two exits that follow come close
    # together and their events may be recorded in either order: nothing is asserted on them.
    text = job(task("announce", f"{SH_WAIT_FOR} {pid_file}; "
                                f"kill -0 $(cat {pid_file}) && echo running > {mark} || echo gone > {mark}",
                    hook="poststart")
               + task("main", f"echo $$ > {pid_file}; "
                              f"{SH_WAIT_FOR} {mark}"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    assert index(run, "Started", "main") < index(run, "Started", "announce")
    assert mark.read_text().strip() == "running"


def test_a_poststart_sidecar_is_killed_when_the_main_task_is_dead(data_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "sidecar.pid"
    text = job(task("shipper", f"echo $$ > {pid_file}; exec sleep 300", hook="poststart", sidecar=True)
               + task("main", f"{SH_WAIT_FOR} {pid_file}"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    assert index(run, "Started", "main") < index(run, "Started", "shipper")
    # The main task ends as soon as the sidecar's process runs, which may be before the runner has
    # recorded the sidecar's Started: its Main Tasks Dead then comes first, and the kill after it.
    assert index(run, "Main Tasks Dead", "shipper") < index(run, "Killing", "shipper")
    assert run.types("shipper")[-3:] == ["Killing", "Terminated", "Killed"]
    assert not alive(int(pid_file.read_text()))


def test_a_poststop_task_runs_after_the_main_task_is_dead(data_dir: Path, tmp_path: Path) -> None:
    pid_file, seen = tmp_path / "main.pid", tmp_path / "seen"
    # The main task's sleep keeps it alive a while for a poststop task started too early to see.
    text = job(task("main", f"echo $$ > {pid_file}; sleep 0.3")
               + task("cleanup", f"kill -0 $(cat {pid_file}) 2>/dev/null && echo alive > {seen} || echo dead > {seen}",
                      hook="poststop"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    assert seen.read_text().strip() == "dead"
    assert index(run, "Terminated", "main") < index(run, "Started", "cleanup")


def test_every_hook_together_in_order(data_dir: Path, tmp_path: Path) -> None:
    """The issue's example: a prestart task, a sidecar, the main task, a poststart and a poststop task.

    Only what herder orders is asserted: the sidecar and the main task both run after the prestart
    task, and the main task beside the poststart task, so their marks may come in either order.
    """
    log, sidecar_up, poststart_ran = tmp_path / "order", tmp_path / "sidecar-up", tmp_path / "poststart-ran"
    text = job(task("init", f"echo init >> {log}", hook="prestart")
               + task("sidecar", f"echo sidecar >> {log}; echo up > {sidecar_up}; exec sleep 300",
                      hook="prestart", sidecar=True)
               + task("main", f"echo main >> {log}; {SH_WAIT_FOR} {sidecar_up} && {SH_WAIT_FOR} {poststart_ran}")
               + task("after", f"echo poststart >> {log}; echo yes > {poststart_ran}", hook="poststart")
               + task("cleanup", f"echo poststop >> {log}", hook="poststop"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    lines = log.read_text().split()
    assert sorted(lines) == ["init", "main", "poststart", "poststop", "sidecar"]
    assert lines.index("init") < lines.index("main") and lines[-1] == "poststop"
    assert index(run, "Terminated", "init") < index(run, "Started", "main")
    assert index(run, "Started", "sidecar") < index(run, "Started", "main")
    assert index(run, "Started", "main") < index(run, "Started", "after")
    assert index(run, "Terminated", "main") < index(run, "Started", "cleanup")
    assert index(run, "Killed", "sidecar") < index(run, "Started", "cleanup")


def test_a_failed_prestart_task_fails_the_allocation_and_the_main_task_never_starts(
        data_dir: Path, tmp_path: Path) -> None:
    seen = tmp_path / "poststop-ran"
    text = job(task("init", "exit 3", hook="prestart") + task("main", "sleep 300")
               + task("cleanup", f"echo yes > {seen}", hook="poststop"), restart=NO_RESTARTS)
    run = run_job(text, data_dir)
    assert run.status == "failed", run.types()
    assert "Started" not in run.types("main")
    assert "Sibling Task Failed" in run.types("main")
    assert "Not Restarting" in run.types("init")
    assert seen.read_text().strip() == "yes"  # poststop tasks run after a failure too, as in Nomad


def test_a_prestart_task_that_exits_0_in_a_service_job_is_complete_not_restarted(
        data_dir: Path, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    text = job(task("init", "exit 0", hook="prestart") + task("main", f"echo up > {ready}; exec sleep 300"),
               type="service")
    run, wait = start_job(text, data_dir)
    wait_for_text(ready)
    # A runner is dead only once it decided not to restart its task: no restart can follow.
    init = next(runner for runner in run.runner.allocs[0].tasks if runner.name == "init")
    wait_for(lambda: init.status.state == "dead", what="the prestart task's runner done")
    assert run.types("init").count("Started") == 1
    assert "Restarting" not in run.types("init")
    run.runner.stop()
    assert wait() == "stopped"


def test_a_prestart_sidecar_in_a_service_job_is_restarted_when_it_exits(data_dir: Path) -> None:
    restart = 'restart {\n attempts = 1\n delay = "0s"\n interval = "1m"\n mode = "fail"\n }'
    text = job(task("side", "exit 0", hook="prestart", sidecar=True) + task("main", "exec sleep 300"),
               type="service", restart=restart)
    run, wait = start_job(text, data_dir)
    restarting = run.wait_for("Restarting", "side")
    assert restarting.event.details["reason"] == "Restart within policy"
    run.runner.stop()
    wait()


def test_stopping_runs_poststop_tasks_after_the_others_are_killed(data_dir: Path, tmp_path: Path) -> None:
    ready, seen = tmp_path / "ready", tmp_path / "poststop-ran"
    text = job(task("side", "exec sleep 300", hook="prestart", sidecar=True)
               + task("main", f"echo up > {ready}; exec sleep 300", extra="leader = true")
               + task("cleanup", f"echo yes > {seen}", hook="poststop"), type="service")
    run, wait = start_job(text, data_dir)
    wait_for_text(ready)
    run.runner.stop()
    assert wait() == "stopped"
    assert seen.read_text().strip() == "yes"
    # Nomad's order: the leader first, the sidecars last, then the poststop tasks
    assert index(run, "Killed", "main") < index(run, "Killing", "side")
    assert index(run, "Killed", "side") < index(run, "Started", "cleanup")


def test_a_dead_leader_kills_the_sidecars_with_its_own_reason(data_dir: Path, tmp_path: Path) -> None:
    side_up = tmp_path / "side-up"
    text = job(task("side", f"echo up > {side_up}; exec sleep 300", hook="poststart", sidecar=True)
               + task("main", f"{SH_WAIT_FOR} {side_up}", extra="leader = true"))
    run = run_job(text, data_dir)
    assert run.status == "complete", run.types()
    assert "Leader Task Dead" in run.types("side")


@pytest.mark.slow
def test_a_restored_allocation_keeps_its_phase(tmp_path: Path, config_file: Path) -> None:
    """herder killed while the main task runs: the next herder reattaches the main
    task and the sidecar, does not run the completed prestart task again, and
    runs the poststop task when it is stopped."""
    data_dir, seen = tmp_path / "data", tmp_path / "poststop-ran"
    runs = tmp_path / "init-runs"
    path = tmp_path / "job.hcl"
    path.write_text(job(task("init", f"echo run >> {runs}", hook="prestart")
                        + task("side", "exec sleep 300", hook="prestart", sidecar=True)
                        + task("main", "exec sleep 300")
                        + task("cleanup", f"echo yes > {seen}", hook="poststop"), type="service"))
    first = HerderRun(path, data_dir, "--keep", config=config_file)
    first.wait_for("Started", 3)  # init, side, main
    first.kill()

    second = HerderRun(path, data_dir, "--keep", config=config_file)
    reattached = second.wait_for("Reattached", 2)
    assert {event["task"] for event in reattached} == {"side", "main"}
    assert second.of("Started") == []
    assert second.interrupt() == 0, second.stderr
    assert runs.read_text().split() == ["run"]
    assert seen.read_text().strip() == "yes"
