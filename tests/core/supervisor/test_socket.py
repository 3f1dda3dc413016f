"""Where the supervisor listens: a socket in a 0700 directory of the data dir, and what squats its names."""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herder.supervisor import ProcInfo, Supervisor, SupervisorUnavailable
from herder.supervisor.logfiles import log_files
from herder.supervisor.protocol import SOCKET_NAME, log_path, socket_address, state_dir
from herder.supervisor.server import LOG_BACKUPS, MAX_LOG_SIZE, LogFile
from herder.supervisor.sessions import REFUSAL_LOG_BURST, REFUSAL_LOG_INTERVAL, Refusals
from tests.core.supervisor.helpers import supervisor_pids
from tests.support.waiting import wait_for

SQUAT_LIMIT = 30.0
"""A generous bound for "refused at once, not after a hang": the real guarantee is that nothing waits."""

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


def nobody() -> pwd.struct_passwd:
    return pwd.getpwnam("nobody")


def listening_paths(pid: int) -> list[str]:
    """The names (``@...`` for an abstract one) of the Unix sockets process ``pid`` listens on."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    names = []
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        # Num RefCount Protocol Flags Type St Inode Path; flags 00010000 is __SO_ACCEPTCON (listening)
        if fields[6] in inodes and int(fields[3], 16) & 0x10000 and len(fields) > 7:
            names.append(fields[7])
    return names


def test_it_listens_in_a_private_directory_of_the_data_dir(
    connect: Callable[..., Supervisor], data_dir: Path
) -> None:
    supervisor = connect()
    directory = state_dir(data_dir)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_ISSOCK((directory / SOCKET_NAME).lstat().st_mode)
    names = listening_paths(supervisor.pid)
    assert names and not [name for name in names if name.startswith("@")], names  # no abstract socket


def test_an_older_directory_is_made_private(connect: Callable[..., Supervisor], data_dir: Path) -> None:
    state_dir(data_dir).mkdir(parents=True, mode=0o755)
    connect()
    assert stat.S_IMODE(state_dir(data_dir).stat().st_mode) == 0o700


def test_a_data_dir_deeper_than_a_socket_path_may_be(
    tmp_path: Path, spawn: Callable[..., ProcInfo], task_env: dict[str, str]
) -> None:
    deep = tmp_path.joinpath(*["a-rather-long-directory-name"] * 6)
    assert len(os.fsencode(deep / "supervisor" / SOCKET_NAME)) > 108
    with Supervisor(deep) as supervisor:
        spawn(supervisor, "t1", ["true"])
        assert supervisor.wait("t1", 30) is not None
        supervisor.forget("t1")
    wait_for(lambda: not supervisor_pids(deep), what="the supervisor of the deep data dir leaves")


def test_a_dead_supervisors_socket_is_replaced(connect: Callable[..., Supervisor], data_dir: Path) -> None:
    killed = connect().pid
    os.kill(killed, signal.SIGKILL)
    wait_for(lambda: not supervisor_pids(data_dir), what="the killed supervisor is gone")
    assert (state_dir(data_dir) / SOCKET_NAME).exists()  # left behind, refusing connections
    assert connect().pid not in (killed, None)


def test_its_socket_is_removed_when_it_leaves(data_dir: Path) -> None:
    with Supervisor(data_dir) as supervisor:
        supervisor.connect()
    wait_for(lambda: not supervisor_pids(data_dir), what="the idle supervisor leaves")
    assert not (state_dir(data_dir) / SOCKET_NAME).exists()


@contextlib.contextmanager
def squatter(data_dir: Path) -> Iterator[Path]:
    """A socket of this test's own listening at the supervisor's name (nothing answers on it)."""
    directory = state_dir(data_dir)
    directory.mkdir(parents=True, mode=0o700, exist_ok=True)
    dir_fd = os.open(directory, os.O_PATH)
    try:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(socket_address(dir_fd))  # the test's data dir may be deeper than a socket path may be
            sock.listen()
            yield directory / SOCKET_NAME
    finally:
        os.close(dir_fd)


def refused(data_dir: Path) -> str:
    """Connect to the supervisor of ``data_dir``: the message of the error it fails with, at once."""
    started = time.monotonic()
    with pytest.raises(SupervisorUnavailable) as error, Supervisor(data_dir) as supervisor:
        supervisor.connect()
    assert time.monotonic() - started < SQUAT_LIMIT
    assert not supervisor_pids(data_dir)
    return str(error.value)


@needs_root
def test_a_directory_of_another_user_is_refused(data_dir: Path) -> None:
    state_dir(data_dir).mkdir(parents=True, mode=0o700)
    os.chown(state_dir(data_dir), nobody().pw_uid, nobody().pw_gid)
    message = refused(data_dir)
    assert f"{state_dir(data_dir)} belongs to uid {nobody().pw_uid}" in message


def test_a_link_for_the_directory_is_refused(data_dir: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data_dir.mkdir(parents=True, exist_ok=True)
    state_dir(data_dir).symlink_to(elsewhere)
    assert "is not a directory" in refused(data_dir)
    assert list(elsewhere.iterdir()) == []


@needs_root
def test_a_socket_of_another_user_is_refused(data_dir: Path) -> None:
    with squatter(data_dir) as path:
        os.chown(path, nobody().pw_uid, nobody().pw_gid, follow_symlinks=False)
        message = refused(data_dir)
    assert f"{path} belongs to uid {nobody().pw_uid}" in message


def test_a_file_at_the_sockets_name_is_refused(data_dir: Path) -> None:
    state_dir(data_dir).mkdir(parents=True, mode=0o700)
    (state_dir(data_dir) / SOCKET_NAME).write_text("squatted")
    assert "is not a socket" in refused(data_dir)


def test_a_daemon_refuses_a_foreign_listener_at_its_name(data_dir: Path) -> None:
    """A socket that answers while no supervisor holds the lock is not a dead supervisor's: it is left alone."""
    with squatter(data_dir):
        result = subprocess.run([sys.executable, "-m", "herder.supervisor", str(data_dir)], capture_output=True,
                                text=True, timeout=SQUAT_LIMIT, check=False)
    assert result.returncode == 1
    assert f"process {os.getpid()} of uid {os.geteuid()} listens on" in result.stderr
    assert "not the supervisor of this data dir" in result.stderr
    assert not supervisor_pids(data_dir)


@needs_root
def test_refused_connections_are_logged_a_few_at_a_time(
    connect: Callable[..., Supervisor], data_dir: Path
) -> None:
    """A peer of another user is still refused where it got in (the directory handed to it, and a
    careless chmod); knocking in a loop does not fill the log."""
    supervisor = connect()
    os.chmod(state_dir(data_dir), 0o711)
    os.chmod(state_dir(data_dir) / SOCKET_NAME, 0o777)
    attempts = REFUSAL_LOG_BURST * 3
    probe = (
        "import socket, sys\n"
        "for _ in range(int(sys.argv[2])):\n"
        "    with socket.socket(socket.AF_UNIX) as sock:\n"
        "        sock.connect(sys.argv[1])\n"
        "        print(repr(sock.recv(100)))\n"
    )
    interpreter = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    dir_fd = os.open(state_dir(data_dir), os.O_PATH)  # the test's directories are closed to nobody
    try:
        result = subprocess.run([interpreter, "-c", probe, socket_address(dir_fd), str(attempts)],
                                user=nobody().pw_uid, pass_fds=(dir_fd,), capture_output=True, text=True,
                                timeout=60, check=False)
    finally:
        os.close(dir_fd)
    assert result.stdout.split() == ["b''"] * attempts, result  # closed at once, unanswered
    text = log_path(data_dir).read_text()
    assert text.count("refused a connection from pid") == REFUSAL_LOG_BURST
    assert supervisor.list() == []  # and it goes on serving its own


def test_refusals_past_the_burst_are_counted_per_interval() -> None:
    refusals = Refusals()
    assert [refusals.note(100.0 + n) for n in range(REFUSAL_LOG_BURST + 3)] == [True] * REFUSAL_LOG_BURST + [False] * 3
    assert refusals.remaining(101.0) == REFUSAL_LOG_INTERVAL - 1
    assert refusals.take_hidden() == 3 and refusals.take_hidden() == 0
    assert refusals.note(100.0 + REFUSAL_LOG_INTERVAL)  # a new interval: logged again


def test_the_supervisor_log_is_rotated_by_size(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "supervisor.log"
    path.parent.mkdir()
    follower = os.open(os.devnull, os.O_WRONLY)
    logger = logging.getLogger("test-supervisor-log")
    logger.propagate = False
    handler = LogFile(path, follow=(follower,))
    logger.addHandler(handler)
    try:
        line = "x" * 1000
        for _ in range((LOG_BACKUPS + 2) * MAX_LOG_SIZE // len(line)):
            logger.warning("%s", line)
        os.write(follower, b"printed\n")  # what a crash would print goes to the current file
    finally:
        logger.removeHandler(handler)
        handler.close()
        os.close(follower)
    names = sorted(child.name for child in path.parent.iterdir())
    assert names == ["supervisor.log"] + [f"supervisor.log.{n}" for n in range(1, LOG_BACKUPS + 1)]
    assert all(child.stat().st_size <= MAX_LOG_SIZE for child in path.parent.iterdir())
    assert path.read_bytes().endswith(b"printed\n")


def test_log_files_helper_skips_what_is_not_a_file(tmp_path: Path) -> None:
    (tmp_path / "web.stdout.0").write_text("a")
    (tmp_path / "web.stdout.1").symlink_to("/etc/passwd")
    assert [path.name for path in log_files(tmp_path, "web", "stdout")] == ["web.stdout.0"]
