"""The supervisor outlives its clients: sessions that keep their tasks or lose them, and its own lifetime."""

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

from herder.supervisor import ExitInfo, ProcInfo, Supervisor, SupervisorUnavailable
from herder.supervisor.protocol import process_start_time
from herder.supervisor.server import START_GRACE
from tests.core.supervisor.helpers import COUNTER, PATH, alive, python, supervisor_pids
from tests.support.waiting import SH_WAIT_FOR, wait_for

Spawn = Callable[..., ProcInfo]

# A herder process in miniature: connects, starts one task, says which, then lives until killed.
CLIENT = """
import json, sys, time
from pathlib import Path
from herder.supervisor import Supervisor
args = json.loads(sys.argv[1])
supervisor = Supervisor(Path(args["data_dir"]), keep=args["keep"], on_lost=args["on_lost"])
info = supervisor.spawn(args["id"], args["argv"], env=args["env"], cwd=None, logs_dir=Path(args["logs_dir"]),
                        task="web", max_files=10, max_file_size=10, stop_signal=2, kill_timeout=5)
print(json.dumps({"pid": info.pid, "start_time": info.start_time}), flush=True)
time.sleep(3600)
"""

# Stops at SIGINT (the stop signal the client asks for), saying so.
GRACEFUL = """
import os, signal, sys, time
def stop(*_):
    os.write(1, b"stopped\\n")  # not print: the signal may come while print("ready") is not done yet
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def run_client(client_env: dict[str, str], **args: Any) -> tuple[subprocess.Popen[str], dict[str, int]]:
    """Start :data:`CLIENT`; returns it and the pid and start time of its task."""
    client = subprocess.Popen(python(CLIENT, json.dumps(args)), stdout=subprocess.PIPE, text=True, env=client_env)
    assert client.stdout is not None
    line = client.stdout.readline()
    assert line, "the client did not start its task"
    return client, json.loads(line)


def kill(client: subprocess.Popen[str]) -> None:
    client.kill()
    client.wait()
    assert client.stdout is not None
    client.stdout.close()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_kept_tasks_survive_their_client_and_lose_no_line(
    connect: Callable[..., Supervisor], data_dir: Path, logs_dir: Path, task_env: dict[str, str],
    client_env: dict[str, str],
) -> None:
    log = logs_dir / "web.stdout.0"
    client, task = run_client(client_env, data_dir=str(data_dir), keep=True, on_lost=None, id="counter",
                              argv=python(COUNTER), env=task_env, logs_dir=str(logs_dir))
    wait_for(lambda: len(lines(log)) >= 20, what="the counter runs")
    kill(client)
    seen = len(lines(log))
    wait_for(lambda: len(lines(log)) >= seen + 20, what="the counter goes on without a client")

    supervisor = connect()
    info = supervisor.attach("counter")
    assert info is not None
    assert (info.pid, info.start_time, info.exit) == (task["pid"], task["start_time"], None)
    [entry] = supervisor.list()
    assert entry.session == supervisor.session and entry.running
    supervisor.stop("counter", signal.SIGTERM, 5)
    assert supervisor.wait("counter", timeout=30) == ExitInfo(128 + signal.SIGTERM, signal.SIGTERM)
    supervisor.forget("counter")
    counted = lines(log)
    assert len(counted) >= seen + 20
    assert counted == [str(n) for n in range(len(counted))]  # in order, no gap


def test_lost_tasks_are_stopped_then_on_lost_runs(
    data_dir: Path, logs_dir: Path, tmp_path: Path, task_env: dict[str, str], client_env: dict[str, str],
) -> None:
    marker = tmp_path / "on-lost-ran"
    pid_file = tmp_path / "task.pid"
    # on_lost records whether the task was gone by the time it ran.
    on_lost = {"argv": ["sh", "-c", f'if [ -e /proc/$(cat {pid_file}) ]; then echo running; else echo gone; fi'
                                    f' > {marker}.tmp && mv {marker}.tmp {marker}'],
               "env": {"PATH": PATH}}
    client, task = run_client(client_env, data_dir=str(data_dir), keep=False, on_lost=on_lost, id="graceful",
                              argv=python(GRACEFUL), env=task_env, logs_dir=str(logs_dir))
    pid_file.write_text(str(task["pid"]))
    wait_for(lambda: lines(logs_dir / "web.stdout.0") == ["ready"], what="the task is ready")
    kill(client)
    wait_for(marker.exists, what="on_lost ran")
    assert marker.read_text() == "gone\n"
    assert lines(logs_dir / "web.stdout.0") == ["ready", "stopped"]  # stopped with its stop signal
    # Nobody will come for the task's exit: the supervisor dropped its record, and exits (see no_leftovers).


def test_an_exit_while_no_client_is_connected_is_reported_on_attach(
    connect: Callable[..., Supervisor], data_dir: Path, logs_dir: Path, tmp_path: Path, task_env: dict[str, str],
    client_env: dict[str, str],
) -> None:
    go = tmp_path / "go"  # the task exits once its client is gone (or after 60 s)
    client, task = run_client(client_env, data_dir=str(data_dir), keep=True, on_lost=None, id="short",
                              argv=["sh", "-c", f"{SH_WAIT_FOR} {go}; exit 7"], env=task_env, logs_dir=str(logs_dir))
    kill(client)
    go.write_text("go\n")
    wait_for(lambda: not alive(task["pid"]), what="the task ends")
    # A supervisor past its start grace with no client exits at once unless something keeps it; the
    # unclaimed exit must. Load only makes the sleep longer, which the test tolerates.
    # deliberate sleep: being past the start grace is the subject, and nothing else says it is over
    time.sleep(START_GRACE + 0.5)
    supervisor = connect()
    info = supervisor.attach("short")
    assert info is not None and info.exit == ExitInfo(7, 0)
    assert supervisor.wait("short") == ExitInfo(7, 0)
    supervisor.forget("short")


def test_bye_leaves_the_tasks_running_for_a_later_client(connect: Callable[..., Supervisor],
                                                         spawn: Spawn) -> None:
    first = connect(keep=False)
    info = spawn(first, "t1", ["sleep", "100"])
    first.close()  # a clean goodbye: even keep=False leaves the task running
    # Load can only lengthen the look, so this cannot flake; it can only miss.
    time.sleep(0.2)  # deliberate sleep: the subject is that nothing happens to the task meanwhile
    second = connect()
    attached = second.attach("t1")
    assert attached is not None and attached.pid == info.pid and attached.exit is None
    second.stop("t1", signal.SIGTERM, 5)
    second.wait("t1", timeout=30)
    second.forget("t1")


def test_racing_clients_start_one_supervisor(data_dir: Path) -> None:
    barrier = threading.Barrier(4)
    pids: list[int] = []

    def race() -> None:
        supervisor = Supervisor(data_dir)
        barrier.wait()
        try:
            pids.append(supervisor.pid)
        finally:
            supervisor.close()

    threads = [threading.Thread(target=race) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(pids) == 4 and len(set(pids)) == 1
    assert supervisor_pids(data_dir) in ([pids[0]], [])  # it may be exiting already: idle


def test_the_supervisor_exits_when_idle(connect: Callable[..., Supervisor], spawn: Spawn,
                                        data_dir: Path) -> None:
    supervisor = connect()
    pid = supervisor.pid
    assert supervisor_pids(data_dir) == [pid]
    spawn(supervisor, "t1", ["true"])
    supervisor.wait("t1", timeout=30)
    supervisor.close()
    # deliberate sleep: past the start grace, only the unforgotten exit keeps the supervisor
    time.sleep(START_GRACE + 0.5)
    assert alive(pid), "an exit nobody forgot keeps it alive"
    again = connect()
    assert again.pid == pid
    again.attach("t1")
    again.forget("t1")
    again.close()
    wait_for(lambda: not alive(pid), what="the idle supervisor exits")


def test_the_supervisor_ignores_sigterm_and_sigint(connect: Callable[..., Supervisor], spawn: Spawn) -> None:
    supervisor = connect()
    info = spawn(supervisor, "t1", ["sleep", "100"])
    for sig in (signal.SIGTERM, signal.SIGINT):
        os.kill(supervisor.pid, sig)
    time.sleep(0.2)  # deliberate sleep: the subject is that nothing happens after the signals
    assert alive(supervisor.pid) and alive(info.pid)
    assert [entry.id for entry in supervisor.list()] == ["t1"]
    supervisor.stop("t1", signal.SIGTERM, 5)
    supervisor.wait("t1", timeout=30)
    supervisor.forget("t1")


def test_a_broken_connection_fails_waiting_calls(connect: Callable[..., Supervisor], spawn: Spawn) -> None:
    supervisor = connect()
    info = spawn(supervisor, "t1", ["sleep", "100"])
    outcome: list[BaseException] = []

    def waiter() -> None:
        try:
            supervisor.wait("t1")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=waiter)
    thread.start()
    os.kill(supervisor.pid, signal.SIGKILL)
    thread.join(30)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], SupervisorUnavailable)
    # Its task is an orphan now, that no supervisor knows: nothing but its pid can stop it.
    assert process_start_time(info.pid) == info.start_time
    os.killpg(info.pid, signal.SIGKILL)
    wait_for(lambda: not alive(info.pid), what="the orphan is gone")
    # The next call starts a new supervisor, which knows nothing of the old one's processes,
    # and removes the cgroups it left.
    assert supervisor.attach("t1") is None
    if info.cgroup is not None:
        wait_for(lambda: not Path(info.cgroup).exists(), what="the old supervisor's cgroup is removed")

