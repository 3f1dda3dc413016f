"""The daemon's building blocks: who may talk to it, what it imports, how it starts."""

from __future__ import annotations

import ast
import os
import resource
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import herder.supervisor
from herder.supervisor import ProcInfo, Supervisor
from herder.supervisor.logfiles import RotatingFile, log_files
from herder.supervisor.protocol import (
    log_path,
    peer_allowed,
    peer_credentials,
    process_alive,
    process_start_time,
)
from herder.supervisor.server import MAX_LOG_SIZE
from tests.core.supervisor.helpers import supervisor_pids

DAEMON_MODULES = ("__main__.py", "server.py", "dispatch.py", "loop.py", "sessions.py", "processes.py", "pump.py",
                  "logfiles.py", "proctree.py", "protocol.py", "netns.py")


def test_peer_credentials_are_the_kernels() -> None:
    left, right = socket.socketpair(socket.AF_UNIX)
    with left, right:
        assert peer_credentials(left) == (os.getpid(), os.geteuid(), os.getegid())


@pytest.mark.parametrize(
    ("peer", "own", "allowed"),
    [(1000, 1000, True), (0, 1000, True), (0, 0, True), (1001, 1000, False), (1000, 0, False)],
)
def test_only_the_same_user_or_root_may_talk(peer: int, own: int, allowed: bool) -> None:
    assert peer_allowed(peer, own) is allowed


def test_process_identity() -> None:
    start_time = process_start_time(os.getpid())
    assert start_time is not None
    assert process_alive(os.getpid(), start_time)
    assert not process_alive(os.getpid(), start_time + 1)
    assert process_start_time(2**22 + 1) is None  # above the largest pid


def test_the_daemon_imports_only_the_standard_library() -> None:
    """The supervisor runs as long as any task: it must stay small (nothing of herder's dependencies)."""
    package = Path(herder.supervisor.__file__).parent
    for name in DAEMON_MODULES:
        tree = ast.parse((package / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                assert top in sys.stdlib_module_names or module.startswith("herder.supervisor."), (name, module)
                if module.startswith("herder.supervisor."):
                    assert f"{module.rsplit('.', 1)[1]}.py" in DAEMON_MODULES, (name, module)


def test_starting_a_second_daemon_is_a_quiet_no_op(connect: Callable[..., Supervisor], data_dir: Path) -> None:
    supervisor = connect()
    result = subprocess.run([sys.executable, "-m", "herder.supervisor", str(data_dir)], capture_output=True,
                            timeout=30, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert supervisor_pids(data_dir) == [supervisor.pid]


def test_usage(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "herder.supervisor"], capture_output=True, text=True,
                            timeout=30, check=False)
    assert result.returncode == 2 and "usage" in result.stderr
    result = subprocess.run([sys.executable, "-m", "herder.supervisor", "--cgroups", str(tmp_path), str(tmp_path)],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2 and f"--cgroups: {tmp_path} is not a cgroup hierarchy" in result.stderr


def test_rotating_file_continues_the_newest_file(tmp_path: Path) -> None:
    (tmp_path / "web.stdout.3").write_bytes(b"x" * 10)
    (tmp_path / "web.stdout.4").write_bytes(b"y" * 10)
    file = RotatingFile(tmp_path, "web", "stdout", max_files=2, max_file_size=1)
    assert (file.index, file.size, file.room) == (4, 10, 1024 * 1024 - 10)
    file.write(memoryview(b"z" * file.room))
    file.rotate()
    file.close()
    assert [path.name for path in log_files(tmp_path, "web", "stdout")] == ["web.stdout.4", "web.stdout.5"]
    with pytest.raises(ValueError, match="max_files"):
        RotatingFile(tmp_path, "web", "stdout", max_files=0, max_file_size=1)


def test_a_long_log_is_started_afresh(connect: Callable[..., Supervisor], data_dir: Path) -> None:
    path = log_path(data_dir)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"old\n" * (MAX_LOG_SIZE // 4 + 1))
    connect()
    assert path.with_name("supervisor.log.1").read_bytes().startswith(b"old\n")
    assert b"old" not in path.read_bytes() and b"started" in path.read_bytes()


def test_tasks_get_the_open_files_limit_the_supervisor_raised_for_itself(
    connect: Callable[..., Supervisor], spawn: Callable[..., ProcInfo], data_dir: Path, logs_dir: Path
) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit on open files leaves nothing to raise")
    started = subprocess.run(["sh", "-c", 'ulimit -Sn 256 && exec "$0" -m herder.supervisor "$1"', sys.executable,
                              str(data_dir)], timeout=30, check=False)
    assert started.returncode == 0
    supervisor = connect()
    limits = Path(f"/proc/{supervisor.pid}/limits").read_text()
    soft = int(next(line for line in limits.splitlines() if line.startswith("Max open files")).split()[3])
    assert soft > 256
    spawn(supervisor, "t1", ["sh", "-c", "ulimit -Sn"])
    supervisor.wait("t1", timeout=30)
    supervisor.forget("t1")
    assert (logs_dir / "web.stdout.0").read_bytes() == b"256\n"
