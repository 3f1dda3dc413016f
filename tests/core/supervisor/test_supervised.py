"""SupervisedProcess: the task handle of process drivers, over the supervisor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder import DriverError, ExitResult, RecoverableError, TaskEvent, TaskHandle, events
from herder.model import LogConfig, Task
from herder.sdk.supervised import SupervisedProcess
from herder.supervisor import ProcInfo, Supervisor, SupervisorUnavailable
from herder.supervisor.protocol import process_start_time
from tests.core.supervisor.helpers import alive, make_ctx, python
from tests.support.waiting import wait_for

# Says which signal stopped it.
TRAP = 'trap "echo usr1; exit 0" USR1; trap "echo int; exit 0" INT; echo ready; while :; do sleep 0.05; done'


@pytest.fixture
def task() -> Task:
    return Task(name="web", driver="raw_exec", kill_timeout=2.0, logs=LogConfig(max_files=3, max_file_size=1))


def test_a_complete_task_handle(connect: Callable[..., Supervisor], task: Task, tmp_path: Path,
                                task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    handle = SupervisedProcess.spawn(task, ctx, ["sh", "-c", "echo hello; exit 4"], env=task_env,
                                     cwd=ctx.task_dir.dir)
    assert isinstance(handle, TaskHandle)
    assert handle.id.startswith("alloc1.web.") and handle.network is None
    assert handle.wait() == ExitResult(exit_code=4)
    assert handle.wait(0) == ExitResult(exit_code=4)  # the same result, again
    assert handle.stats() is None
    assert (ctx.task_dir.logs_dir / "web.stdout.0").read_bytes() == b"hello\n"
    assert ctx.supervisor.list() == []  # forgotten once seen


def test_kill_stops_the_task_gracefully_or_by_force(connect: Callable[..., Supervisor], task: Task,
                                                   tmp_path: Path, task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    handle = SupervisedProcess.spawn(task, ctx, ["sleep", "100"], env=task_env, cwd=ctx.task_dir.dir)
    # Asked until the memory shows: a process caught between fork and exec has an rss of 0.
    stats = wait_for(lambda: (shown := handle.stats()) is not None and shown.memory_rss_bytes and shown,
                     what=lambda: f"the task's memory in its stats (last {handle.stats()})")
    assert stats.pids == 1 and stats.cpu_total_ns is not None
    assert handle.wait(0.05) is None
    handle.kill(5)  # the default signal, SIGINT
    assert handle.wait() == ExitResult(exit_code=128 + signal.SIGINT, signal=signal.SIGINT)

    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n" \
               "time.sleep(100)"
    handle = SupervisedProcess.spawn(task, ctx, python(stubborn), env=task_env, cwd=ctx.task_dir.dir)
    wait_for(lambda: b"ready" in (ctx.task_dir.logs_dir / "web.stdout.0").read_bytes(), what="ready")
    started = time.monotonic()
    handle.kill(0.5, signal.SIGTERM)
    assert time.monotonic() - started >= 0.5  # the SIGKILL came after the timeout, not instead of it
    assert handle.wait() == ExitResult(exit_code=128 + signal.SIGKILL, signal=signal.SIGKILL)
    handle.signal(signal.SIGTERM)  # exited and forgotten: nothing to do


def test_a_task_gets_default_signal_dispositions_whatever_its_starter_ignored(
        connect: Callable[..., Supervisor], task: Task, tmp_path: Path, task_env: dict[str, str]) -> None:
    """Started under ``nohup`` (SIGHUP ignored), herder's tasks may still trap SIGHUP."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        ctx = make_ctx(tmp_path, connect())  # the supervisor starts now, with SIGHUP ignored
    finally:
        signal.signal(signal.SIGHUP, previous)
    handle = SupervisedProcess.spawn(task, ctx, ["grep", "^SigIgn:", "/proc/self/status"], env=task_env,
                                     cwd=ctx.task_dir.dir)
    assert handle.wait() == ExitResult(exit_code=0)
    ignored = int((ctx.task_dir.logs_dir / "web.stdout.0").read_text().split()[1], 16)
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        assert not ignored & (1 << (sig - 1)), f"{sig.name} is ignored in the task"


def test_state_recovers_through_a_new_client(connect: Callable[..., Supervisor], task: Task, tmp_path: Path,
                                             task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    handle = SupervisedProcess.spawn(task, ctx, ["sleep", "100"], env=task_env, cwd=ctx.task_dir.dir)
    state = json.loads(json.dumps(handle.state()))
    saved = {key: value for key, value in state["supervisor"].items() if key != "cgroup"}  # see test_process_tree
    assert saved == {"id": handle.id, "pid": handle.pid, "start_time": process_start_time(handle.pid)}
    ctx.supervisor.close()

    recovered = SupervisedProcess.recover(make_ctx(tmp_path, connect()), state)
    assert recovered is not None and (recovered.id, recovered.pid) == (handle.id, handle.pid)
    recovered.signal(signal.SIGTERM)
    assert recovered.wait(30) == ExitResult(exit_code=128 + signal.SIGTERM, signal=signal.SIGTERM)
    assert SupervisedProcess.recover(make_ctx(tmp_path, connect()), {"pid": 1}) is None  # not our state


def test_recover_kills_the_orphan_no_supervisor_knows(connect: Callable[..., Supervisor], tmp_path: Path,
                                                      task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    orphans = [subprocess.Popen(["sleep", "100"], env=task_env, start_new_session=True) for _ in range(2)]
    try:
        mine, other = orphans
        state = {"supervisor": {"id": "alloc1.web.gone", "pid": mine.pid, "start_time": process_start_time(mine.pid)}}
        assert SupervisedProcess.recover(ctx, state) is None
        assert mine.wait(30) == -signal.SIGKILL
        # A pid whose start time differs is another process now: left alone.
        state = {"supervisor": {"id": "alloc1.web.gone", "pid": other.pid, "start_time": 1}}
        assert SupervisedProcess.recover(ctx, state) is None
        assert other.poll() is None
    finally:
        for orphan in orphans:
            orphan.kill()
            orphan.wait()


def test_losing_the_supervisor_ends_the_wait_and_the_task(connect: Callable[..., Supervisor], task: Task,
                                                          tmp_path: Path, task_env: dict[str, str]) -> None:
    supervisor = connect()
    ctx = make_ctx(tmp_path, supervisor)
    handle = SupervisedProcess.spawn(task, ctx, ["sleep", "100"], env=task_env, cwd=ctx.task_dir.dir)
    os.kill(supervisor.pid, signal.SIGKILL)
    result = handle.wait(10)
    assert result is not None and result.error is not None and "lost the process supervisor" in result.error
    wait_for(lambda: not alive(handle.pid), what="the orphaned task is gone")


def test_start_failures_are_driver_errors(connect: Callable[..., Supervisor], task: Task, tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, connect())
    with pytest.raises(DriverError, match="cannot start '/nonexistent/command'"):
        SupervisedProcess.spawn(task, ctx, ["/nonexistent/command"], env={}, cwd=ctx.task_dir.dir)
    with pytest.raises(DriverError, match="no process supervisor"):
        SupervisedProcess.spawn(task, make_ctx(tmp_path, None), ["true"], env={}, cwd=ctx.task_dir.dir)


def test_the_task_kill_signal_is_what_a_lost_session_stops_it_with(
    data_dir: Path, task: Task, tmp_path: Path, task_env: dict[str, str], client_env: dict[str, str]
) -> None:
    # In a client process: the task's kill_signal (SIGUSR1 here) reaches the supervisor with the spawn.
    script = f"""
import io, sys, time
from pathlib import Path
from herder.model import LogConfig, Task
from herder.sdk.supervised import SupervisedProcess
from herder.supervisor import ProcInfo, Supervisor, SupervisorUnavailable
from tests.core.supervisor.helpers import make_ctx
ctx = make_ctx(Path({str(tmp_path)!r}), Supervisor(Path({str(data_dir)!r}), keep=False))
task = Task(name="web", driver="raw_exec", kill_signal="SIGUSR1", logs=LogConfig(max_files=3, max_file_size=1))
handle = SupervisedProcess.spawn(task, ctx, ["sh", "-c", {TRAP!r}], env={task_env!r}, cwd=Path("/"))
print(handle.pid, flush=True)
time.sleep(3600)
"""
    client = subprocess.Popen(python(script), stdout=subprocess.PIPE, text=True, env=client_env,
                              cwd=Path(__file__).parents[3])
    assert client.stdout is not None
    pid = int(client.stdout.readline())
    log = tmp_path / "alloc1" / "alloc" / "logs" / "web.stdout.0"
    wait_for(lambda: log.read_bytes() == b"ready\n", what="the task is ready")
    client.kill()
    client.wait()
    client.stdout.close()
    wait_for(lambda: not alive(pid), what="the task is stopped")
    # The supervisor moves the task's last words into the log just after it died.
    wait_for(lambda: log.read_bytes() == b"ready\nusr1\n", what="the task saw SIGUSR1")


def test_a_start_whose_answer_is_lost_leaves_nothing_running(connect: Callable[..., Supervisor], task: Task,
                                                             tmp_path: Path, task_env: dict[str, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    supervisor = connect()
    started: list[ProcInfo] = []
    real_spawn = supervisor.spawn

    def spawn_then_lose_the_answer(*args: Any, **kwargs: Any) -> ProcInfo:
        started.append(real_spawn(*args, **kwargs))
        raise SupervisorUnavailable("lost the connection to the supervisor")

    monkeypatch.setattr(supervisor, "spawn", spawn_then_lose_the_answer)
    ctx = make_ctx(tmp_path, supervisor)
    with pytest.raises(RecoverableError, match="lost the connection"):
        SupervisedProcess.spawn(task, ctx, ["sleep", "100"], env=task_env, cwd=ctx.task_dir.dir)
    [info] = started
    assert not alive(info.pid)
    assert supervisor.list() == []


def test_threads_waiting_together_all_see_the_exit(connect: Callable[..., Supervisor], task: Task,
                                                   tmp_path: Path, task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    handle = SupervisedProcess.spawn(task, ctx, ["sh", "-c", "sleep 0.2; exit 5"], env=task_env,
                                     cwd=ctx.task_dir.dir)
    results: list[ExitResult | None] = []
    waiters = [threading.Thread(target=lambda: results.append(handle.wait())) for _ in range(10)]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join()
    assert results == [ExitResult(exit_code=5)] * 10


def test_on_exit_calls_back_once_the_exit_is_in_without_a_waiting_thread(
        connect: Callable[..., Supervisor], task: Task, tmp_path: Path, task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    release = tmp_path / "release"
    handle = SupervisedProcess.spawn(task, ctx, ["sh", "-c", f"while ! test -e {release}; do sleep 0.02; done; exit 3"],
                                     env=task_env, cwd=ctx.task_dir.dir)
    exited = threading.Event()
    assert handle.on_exit(exited.set) is True
    assert not exited.is_set() and handle.wait(0) is None
    release.touch()
    assert exited.wait(30)
    assert handle.wait(0) == ExitResult(exit_code=3)  # the exit is in: no wait
    again = threading.Event()
    handle.on_exit(again.set)  # after the exit: at once
    assert again.is_set()


def test_on_exit_calls_back_when_the_supervisor_is_lost(connect: Callable[..., Supervisor], task: Task,
                                                        tmp_path: Path, task_env: dict[str, str]) -> None:
    supervisor = connect()
    ctx = make_ctx(tmp_path, supervisor)
    handle = SupervisedProcess.spawn(task, ctx, ["sleep", "100"], env=task_env, cwd=ctx.task_dir.dir)
    lost = threading.Event()
    handle.on_exit(lost.set)
    os.kill(supervisor.pid, signal.SIGKILL)
    assert lost.wait(30)
    result = handle.wait(0)
    assert result is not None and result.error is not None and "lost the process supervisor" in result.error
    wait_for(lambda: not alive(handle.pid), what="the orphaned task is gone")


def test_a_planted_log_link_is_told_to_the_task_in_an_event(connect: Callable[..., Supervisor], task: Task,
                                                            tmp_path: Path, task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    told: list[TaskEvent] = []
    ctx.emitter = told.append
    target = tmp_path / "host-file"
    (ctx.task_dir.logs_dir / "web.stderr.0").symlink_to(target)
    handle = SupervisedProcess.spawn(task, ctx, ["sh", "-c", "echo oops >&2"], env=task_env, cwd=ctx.task_dir.dir)
    assert handle.wait() == ExitResult(exit_code=0)
    assert not target.exists()
    assert (ctx.task_dir.logs_dir / "web.stderr.1").read_bytes() == b"oops\n"
    assert [event.type for event in told] == [events.UNSAFE_LOG_FILE]
    assert "web.stderr.0 was a symbolic link" in told[0].message
