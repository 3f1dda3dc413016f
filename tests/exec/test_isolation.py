"""What a task of the exec driver sees, and what it cannot reach; its limits and their reports."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import pytest

from herder.testing import DriverHarness
from herder.testing.plugin import HarnessFactory
from tests.support.waiting import wait_for

from .helpers import runc, sh

HOG = 'x=$(head -c 200000000 /dev/zero | tr "\\0" a); echo survived'
PYTHON = Path("/usr/bin/python3")
FORK_BOMB = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.01)\n"
"""Every process forks for ever, and tries again when it cannot (a shell that fails to fork exits instead)."""


@pytest.fixture
def harness(exec_driver: str, driver_harness: HarnessFactory) -> DriverHarness:
    return driver_harness("exec", {})


def test_runs_as_nobody_with_its_own_pid_namespace(harness: DriverHarness) -> None:
    run = harness.task(sh('echo "$(id -u):$(id -g) $$"'))
    run.start()
    result = run.wait(30)
    assert result is not None and result.successful, result
    assert run.output().decode().split() == ["65534:65534", "1"]


def test_cannot_read_the_host_outside_the_bound_directories(harness: DriverHarness) -> None:
    secret = harness.data_dir.parent / f"secret-{uuid.uuid4().hex}"
    secret.write_text("host secret\n")
    secret.chmod(0o644)
    script = f"cat {secret}; ls /root; ls {harness.data_dir}; echo checked"
    run = harness.task(sh(script))
    run.start()
    assert run.wait(30) is not None
    out = run.output("stdout") + run.output("stderr")
    assert b"checked" in out and b"host secret" not in out
    assert out.count(b"No such file or directory") == 3, out


def test_writes_to_local_reach_the_task_dir(harness: DriverHarness) -> None:
    run = harness.task(sh("echo hello > /local/x && echo secret-ok > /secrets/y && cat /secrets/y > /tmp/z "
                          "&& cat /tmp/z"))
    run.start()
    result = run.wait(30)
    assert result is not None and result.successful, (result, run.output("stderr"))
    assert run.local_file("x").read_text() == "hello\n"
    assert (run.ctx.task_dir.local_dir / "x").stat().st_uid == 65534
    assert run.output() == b"secret-ok\n"


def test_the_system_directories_are_read_only(harness: DriverHarness) -> None:
    run = harness.task(sh("touch /usr/herder-x /etc/herder-x /herder-x 2>&1; echo done"), user="root")
    run.start()
    assert run.wait(30) is not None
    out = run.output()
    assert out.count(b"Read-only file system") == 3, out
    assert not Path("/usr/herder-x").exists() and not Path("/etc/herder-x").exists()


def test_a_memory_hog_is_oom_killed_and_reported(harness: DriverHarness) -> None:
    run = harness.task(sh(HOG), resources={"memory": 32})
    run.start()
    result = run.wait(60)
    assert result is not None, "the hog still runs"
    assert result.oom_killed and not result.successful, result
    assert b"survived" not in run.output()


def test_a_task_within_its_memory_is_not_oom_killed(harness: DriverHarness) -> None:
    run = harness.task(sh("exit 0"), resources={"memory": 32})
    run.start()
    result = run.wait(30)
    assert result is not None and result.successful and not result.oom_killed, result


def test_a_killed_task_is_not_reported_oom_killed(harness: DriverHarness) -> None:
    run = harness.task(sh("trap '' INT TERM; sleep 3600 & wait"), kill_timeout="1s", resources={"memory": 32})
    run.start()
    wait_for(lambda: len(runc().pids(_id(run))) == 2, what="the task's two processes")
    run.kill()
    assert run.result is None or not run.result.oom_killed
    result = run.wait(30)
    assert result is not None and result.signal == signal.SIGKILL and not result.oom_killed, result


def test_a_fork_bomb_is_contained_by_the_pids_limit_and_killed(exec_driver: str,
                                                               driver_harness: HarnessFactory) -> None:
    if not PYTHON.exists():
        pytest.skip(f"the fork bomb is a Python script, and {PYTHON} is missing")
    harness = driver_harness("exec", {"default_pids_limit": 32})
    run = harness.task({"command": str(PYTHON), "args": ["-c", FORK_BOMB]}, kill_timeout="1s",
                       resources={"memory": 256})
    run.start()
    container = _id(run)
    wait_for(lambda: len(runc().pids(container)) >= 30, what=lambda: f"30 forks, not {runc().pids(container)}")
    assert len(runc().pids(container)) <= 32
    run.kill()
    assert run.wait(30) is not None
    assert runc().pids(container) == []


def test_exec_runs_inside_the_container(harness: DriverHarness) -> None:
    run = harness.task(sh('echo ready > /local/ready; exec sleep 3600'), kill_timeout="1s")
    run.start()
    wait_for(lambda: run.local_file("ready").is_file(), what="the task ready")
    result = run.exec(["/bin/sh", "-c", "ls /local; cat /proc/1/cmdline | tr '\\0' ' '; echo; id -u"], 10)
    lines = result.output.decode().splitlines()
    assert result.exit_code == 0 and lines == ["ready", "sleep 3600 ", "65534"], lines


def test_a_child_dies_with_the_task(harness: DriverHarness) -> None:
    run = harness.task(sh("sleep 3600 & echo $! > /local/child; trap 'exit 0' INT; wait"), kill_timeout="5s")
    run.start()
    container = _id(run)
    wait_for(lambda: len(runc().pids(container)) == 2, what="the task and its child")
    host_pids = runc().pids(container)
    run.kill()
    result = run.wait(30)
    assert result is not None and result.exit_code == 0, result
    wait_for(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in host_pids), what="the child gone")


def test_cleanup_removes_the_container_its_cgroup_and_bundle(harness: DriverHarness) -> None:
    run = harness.task(sh("exec sleep 3600"), kill_timeout="1s")
    run.start()
    container = _id(run)
    wait_for(lambda: runc().state(container) is not None, what="the container created")
    cgroup = Path("/sys/fs/cgroup/memory/herder") / container
    run.kill()
    run.cleanup()
    assert runc().state(container) is None
    assert not (run.ctx.task_dir.dir / "bundle").exists()
    assert not cgroup.exists()
    run.cleanup()


def test_a_container_left_by_a_crash_is_removed_before_the_next_start(harness: DriverHarness) -> None:
    run = harness.task(sh("exec sleep 3600"), kill_timeout="1s")
    first = run.start()
    container = _id(run)
    wait_for(lambda: len(runc().pids(container)) == 1, what="the container's one process")
    [orphan] = runc().pids(container)
    # What a crash leaves: runc's own process killed (the container's init, in a session of its own,
    # runs on), and no herder that knows of the container.
    os.kill(first.state()["supervisor"]["pid"], signal.SIGKILL)
    assert first.wait(30) is not None
    assert runc().pids(container) == [orphan]
    second = run.start()
    wait_for(lambda: not os.path.exists(f"/proc/{orphan}"), what="the orphan gone")
    wait_for(lambda: len(runc().pids(container)) == 1, what="the new container's one process")
    assert runc().pids(container) != [orphan]
    second.kill(1, None)
    assert second.wait(30) is not None


def _id(run: object) -> str:
    from herder.testing.harness import TaskRun

    assert isinstance(run, TaskRun) and run.handle is not None
    return run.handle.id


def test_reserved_cores_pin_the_task_and_two_allocations_do_not_share_them(harness: DriverHarness) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to reserve one apart from another")
    script = 'grep Cpus_allowed_list /proc/self/status; echo "$NOMAD_CPU_CORES"'
    runs = [harness.task(sh(script), resources={"cores": 1}) for _ in range(2)]
    seen = []
    for run in runs:
        run.start()
        result = run.wait(30)
        assert result is not None and result.successful, (result, run.output("stderr"))
        allowed, announced = run.output().decode().split("\n")[:2]
        (core,) = run.ctx.cores
        assert allowed.split() == ["Cpus_allowed_list:", str(core)] and announced == str(core)
        seen.append(core)
    assert len(set(seen)) == 2  # each allocation its own core
