"""The supervisor runs processes: exits, output into the rotating files, signals and stops."""

from __future__ import annotations

import os
import pwd
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.supervisor import ExitInfo, ProcInfo, Supervisor, SupervisorError
from herder.supervisor.logfiles import log_files
from herder.supervisor.processes import DRAIN_TIMEOUT
from herder.supervisor.protocol import log_path
from herder.supervisor.pump import PIPE_SIZE
from tests.core.supervisor.helpers import WRITER, alive, kill_all, marked_pids, python, writer_output
from tests.support.waiting import wait_for

MIB = 1024 * 1024
Spawn = Callable[..., ProcInfo]

# Leaves a process behind in a session of its own (out of the task's process group), holding the
# task's output pipes, and exits once it is there: in a cgroup, the process is killed with the task.
ESCAPE = """
import os, time
ready, done = os.pipe()
if os.fork() == 0:
    os.setsid()
    os.write(done, b"x")
    time.sleep(30)
    os._exit(0)
os.read(ready, 1)
print("started", flush=True)
"""


def test_exit_code_and_record(connect: Callable[..., Supervisor], spawn: Spawn) -> None:
    supervisor = connect()
    info = spawn(supervisor, "t1", ["sh", "-c", "exit 3"])
    assert info.pid > 0 and info.start_time > 0 and info.exit is None
    assert supervisor.wait("t1", timeout=30) == ExitInfo(exit_code=3, signal=0)
    [entry] = supervisor.list()
    assert (entry.id, entry.pid, entry.running, entry.exit) == ("t1", info.pid, False, ExitInfo(3, 0))
    assert entry.session == supervisor.session
    supervisor.forget("t1")
    assert supervisor.list() == []


def test_killed_by_a_signal(connect: Callable[..., Supervisor], spawn: Spawn) -> None:
    supervisor = connect()
    spawn(supervisor, "t1", ["sleep", "100"])
    assert supervisor.wait("t1", timeout=0.1) is None
    supervisor.signal("t1", signal.SIGTERM)
    assert supervisor.wait("t1", timeout=30) == ExitInfo(exit_code=128 + signal.SIGTERM, signal=signal.SIGTERM)
    supervisor.forget("t1")


def test_stdout_and_stderr_land_in_their_files(connect: Callable[..., Supervisor], spawn: Spawn,
                                               logs_dir: Path) -> None:
    supervisor = connect()
    spawn(supervisor, "t1", ["sh", "-c", "echo out; echo err >&2; echo more"])
    supervisor.wait("t1", timeout=30)
    supervisor.forget("t1")
    assert (logs_dir / "web.stdout.0").read_bytes() == b"out\nmore\n"
    assert (logs_dir / "web.stderr.0").read_bytes() == b"err\n"


def test_output_rotates_and_is_all_there_when_the_exit_is_seen(connect: Callable[..., Supervisor],
                                                              spawn: Spawn, logs_dir: Path) -> None:
    supervisor = connect()
    lines = 60_000  # about 3.7 MiB: three rotations at 1 MiB
    spawn(supervisor, "t1", python(WRITER, str(lines)), max_files=2, max_file_size=1)
    assert supervisor.wait("t1", timeout=30) == ExitInfo(0, 0)
    supervisor.forget("t1")
    output = writer_output(lines)
    files = log_files(logs_dir, "web", "stdout")
    indexes = [int(path.name.rsplit(".", 1)[1]) for path in files]
    assert indexes == [2, 3]
    assert files[0].stat().st_size == MIB
    kept = b"".join(path.read_bytes() for path in files)
    assert output.endswith(kept)
    assert len(output) - len(kept) == indexes[0] * MIB  # every byte since the oldest kept file began


def test_a_large_stream_is_kept_byte_for_byte_across_many_rotations(
    connect: Callable[..., Supervisor], spawn: Spawn, logs_dir: Path, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    source.write_bytes(os.urandom(48 * MIB + 12345))  # ends partway through a file
    supervisor = connect()
    spawn(supervisor, "t1", ["cat", str(source)], max_files=60, max_file_size=1)
    assert supervisor.wait("t1", timeout=120) == ExitInfo(0, 0)
    supervisor.forget("t1")
    files = log_files(logs_dir, "web", "stdout")
    assert [path.name for path in files] == [f"web.stdout.{index}" for index in range(49)]
    assert all(path.stat().st_size == MIB for path in files[:-1])
    assert b"".join(path.read_bytes() for path in files) == source.read_bytes()


def test_pipes_grow_for_tasks_that_write_in_bulk(connect: Callable[..., Supervisor], spawn: Spawn,
                                                 logs_dir: Path) -> None:
    report = "import fcntl, sys\nsys.stderr.write(str(fcntl.fcntl(1, fcntl.F_GETPIPE_SZ)))"
    supervisor = connect()
    spawn(supervisor, "quiet", python("print('hello')\n" + report), task="quiet")
    spawn(supervisor, "bulk", python("import sys\nsys.stdout.buffer.write(b'x' * 4 * 1024 * 1024)\n"
                                     "sys.stdout.flush()\n" + report), task="bulk")
    for id in ("quiet", "bulk"):
        assert supervisor.wait(id, timeout=30) == ExitInfo(0, 0)
        supervisor.forget(id)
    quiet = int((logs_dir / "quiet.stderr.0").read_text())
    bulk = int((logs_dir / "bulk.stderr.0").read_text())
    assert bulk > quiet  # a quiet task does not take from the user's pipe buffers (64 MiB in all)
    assert bulk == min(PIPE_SIZE, int(Path("/proc/sys/fs/pipe-max-size").read_text()))
    assert (logs_dir / "bulk.stdout.0").stat().st_size == 4 * MIB


def test_a_new_run_of_the_task_continues_its_files(connect: Callable[..., Supervisor], spawn: Spawn,
                                                   logs_dir: Path) -> None:
    supervisor = connect()
    for run in range(3):
        spawn(supervisor, f"t{run}", ["echo", f"run {run}"])
        supervisor.wait(f"t{run}", timeout=30)
        supervisor.forget(f"t{run}")
    assert [path.name for path in log_files(logs_dir, "web", "stdout")] == ["web.stdout.0"]
    assert (logs_dir / "web.stdout.0").read_bytes() == b"run 0\nrun 1\nrun 2\n"


def test_stop_reaches_the_whole_process_group(connect: Callable[..., Supervisor], spawn: Spawn,
                                              logs_dir: Path) -> None:
    supervisor = connect()
    # A background job of a non-interactive shell ignores SIGINT: only the group kill takes it.
    spawn(supervisor, "t1", ["sh", "-c", "sleep 100 & echo $!; wait"])
    wait_for(lambda: (logs_dir / "web.stdout.0").read_bytes().endswith(b"\n"), what="the child's pid")
    child = int((logs_dir / "web.stdout.0").read_text())
    supervisor.stop("t1", signal.SIGINT, 5)
    assert supervisor.wait("t1", timeout=30) == ExitInfo(128 + signal.SIGINT, signal.SIGINT)
    supervisor.forget("t1")
    wait_for(lambda: not alive(child), what="the child is gone")


def test_stop_kills_after_the_timeout(connect: Callable[..., Supervisor], spawn: Spawn, logs_dir: Path) -> None:
    supervisor = connect()
    stubborn = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nprint('ready', flush=True)\n" \
               "time.sleep(100)"
    spawn(supervisor, "t1", python(stubborn))
    wait_for(lambda: (logs_dir / "web.stdout.0").read_bytes() == b"ready\n", what="ready")
    started = time.monotonic()
    supervisor.stop("t1", signal.SIGINT, 0.5)
    assert supervisor.wait("t1", timeout=30) == ExitInfo(128 + signal.SIGKILL, signal.SIGKILL)
    assert time.monotonic() - started >= 0.5  # the SIGKILL came after the timeout, not instead of it
    supervisor.forget("t1")


def test_the_leaders_exit_takes_its_group_with_it(connect: Callable[..., Supervisor], spawn: Spawn,
                                                  logs_dir: Path, data_dir: Path) -> None:
    supervisor = connect()
    spawn(supervisor, "t1", ["sh", "-c", "sleep 100 & echo $!"])
    assert supervisor.wait("t1", timeout=30) == ExitInfo(0, 0)
    supervisor.forget("t1")
    assert "holds the pipe" not in log_path(data_dir).read_text()  # the child that held it was killed
    child = int((logs_dir / "web.stdout.0").read_text())
    wait_for(lambda: not alive(child), what="the child is gone")  # killed: it may still be on its way out


def test_a_process_outside_the_task_holding_the_pipes_delays_the_exit_at_most_2s(
    connect: Callable[..., Supervisor], spawn: Spawn, logs_dir: Path, data_dir: Path, mark: str,
    start_supervisor: Callable[..., None]
) -> None:
    # Without a cgroup, a child that left the session before the supervisor first saw it is out of reach.
    start_supervisor("--cgroups", "none")
    supervisor = connect()
    spawn(supervisor, "t1", python(ESCAPE))
    started = time.monotonic()
    try:
        assert supervisor.wait("t1", timeout=30) == ExitInfo(0, 0)
        assert time.monotonic() - started >= DRAIN_TIMEOUT
        assert (logs_dir / "web.stdout.0").read_bytes() == b"started\n"
        assert "stdout of t1: a process outside the task still holds the pipe" in log_path(data_dir).read_text()
    finally:
        kill_all(marked_pids(mark))
    supervisor.forget("t1")


@pytest.mark.parametrize(
    ("argv", "options", "message"),
    [
        (["/nonexistent/command"], {}, "No such file"),
        (["true"], {"cwd": "/nonexistent/dir"}, "No such file"),
        (["true"], {"user": "no-such-user-herder"}, "no-such-user-herder"),
    ],
)
def test_a_process_that_cannot_start_is_an_error(connect: Callable[..., Supervisor], spawn: Spawn,
                                                  argv: list[str], options: dict[str, str], message: str) -> None:
    supervisor = connect()
    with pytest.raises(SupervisorError, match=message) as caught:
        spawn(supervisor, "t1", argv, **options)
    assert "cannot start" in str(caught.value)
    assert supervisor.list() == []
    # The supervisor is fine: the next process starts.
    spawn(supervisor, "t2", ["true"])
    supervisor.wait("t2", timeout=30)
    supervisor.forget("t2")


def test_ids_and_records(connect: Callable[..., Supervisor], spawn: Spawn) -> None:
    supervisor = connect()
    spawn(supervisor, "t1", ["sleep", "100"])
    with pytest.raises(SupervisorError, match="exists"):
        spawn(supervisor, "t1", ["true"])
    with pytest.raises(SupervisorError, match="has not exited"):
        supervisor.forget("t1")
    assert supervisor.attach("nobody-knows-me") is None
    with pytest.raises(SupervisorError, match="no process"):
        supervisor.signal("nobody-knows-me", signal.SIGTERM)
    with pytest.raises(SupervisorError, match="not supervised through this client"):
        supervisor.wait("nobody-knows-me")
    supervisor.stop("t1", signal.SIGTERM, 5)
    supervisor.wait("t1", timeout=30)
    supervisor.signal("t1", signal.SIGTERM)  # exited: nothing to do
    supervisor.forget("t1")
    supervisor.forget("t1")  # forgotten already: nothing to do


def test_many_threads_share_one_client(connect: Callable[..., Supervisor], spawn: Spawn) -> None:
    supervisor = connect()
    results: dict[int, ExitInfo | None] = {}

    def run(n: int) -> None:
        spawn(supervisor, f"t{n}", ["sh", "-c", f"exit {n}"], task=f"task{n}")
        results[n] = supervisor.wait(f"t{n}", timeout=30)
        supervisor.forget(f"t{n}")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {n: ExitInfo(n, 0) for n in range(20)}


def test_output_can_go_straight_to_files_another_program_reads(connect: Callable[..., Supervisor], spawn: Spawn,
                                                               logs_dir: Path, tmp_path: Path) -> None:
    """What the Nomad integration uses: Nomad's log collector reads FIFOs; no rotating file is written."""
    fifo = tmp_path / "stdout.fifo"
    os.mkfifo(fifo)
    stderr = tmp_path / "stderr.log"
    stderr.write_bytes(b"earlier\n")
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        supervisor = connect()
        spawn(supervisor, "t1", ["sh", "-c", "echo out; echo err >&2"], output_paths=(fifo, stderr))
        assert supervisor.wait("t1", timeout=30) == ExitInfo(exit_code=0, signal=0)
        supervisor.forget("t1")
        assert os.read(reader, 100) == b"out\n"
    finally:
        os.close(reader)
    assert stderr.read_bytes() == b"earlier\nerr\n"
    assert log_files(logs_dir, "web", "stdout") == []


def test_a_users_process_has_its_groups_and_those_asked_for(connect: Callable[..., Supervisor], spawn: Spawn,
                                                            logs_dir: Path) -> None:
    """As qemu's, given /dev/kvm's group: not root's groups, the user's and the one asked for."""
    if os.geteuid() != 0:
        pytest.skip("running a process as another user needs root")
    nobody = pwd.getpwnam("nobody")
    supervisor = connect()
    spawn(supervisor, "t1", ["sh", "-c", "id -u; id -G"], user="nobody", groups=[4242, nobody.pw_gid])
    assert supervisor.wait("t1", timeout=30) == ExitInfo(0, 0)
    supervisor.forget("t1")
    uid, groups = (logs_dir / "web.stdout.0").read_text().splitlines()
    assert uid == str(nobody.pw_uid)
    assert sorted(map(int, groups.split())) == sorted({*os.getgrouplist("nobody", nobody.pw_gid), 4242})
    with pytest.raises(SupervisorError, match=r"bad request: groups is \['kvm'\]"):
        spawn(supervisor, "t2", ["true"], user="nobody", groups=["kvm"])


def test_a_fifo_nobody_reads_is_refused_at_once(connect: Callable[..., Supervisor], spawn: Spawn,
                                                tmp_path: Path) -> None:
    fifo = tmp_path / "stdout.fifo"
    os.mkfifo(fifo)
    supervisor = connect()
    with pytest.raises(SupervisorError, match="cannot start"):
        spawn(supervisor, "t1", ["true"], output_paths=(fifo, tmp_path / "stderr.log"))
    assert supervisor.list() == []


def test_an_output_path_swapped_for_a_link_is_not_followed(connect: Callable[..., Supervisor], spawn: Spawn,
                                                           tmp_path: Path) -> None:
    """Nomad's log FIFOs are in the task's log directory: a link put in place of one is refused."""
    target = tmp_path / "host-file"
    target.write_bytes(b"host\n")
    (tmp_path / "stdout.fifo").symlink_to(target)
    supervisor = connect()
    with pytest.raises(SupervisorError, match="cannot start"):
        spawn(supervisor, "t1", ["echo", "out"], output_paths=(tmp_path / "stdout.fifo", tmp_path / "stderr.log"))
    assert target.read_bytes() == b"host\n"
