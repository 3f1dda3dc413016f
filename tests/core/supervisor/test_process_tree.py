"""Every process a task starts, in or out of its session: cgroups, the fallback without them, and the daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herder.model import Task
from herder.sdk.supervised import SupervisedProcess
from herder.supervisor import ExitInfo, ProcInfo, Supervisor
from herder.supervisor.proctree import (
    CGROUP_ROOT,
    Cgroup,
    ProcessTree,
    SessionTree,
    cgroup_hierarchy,
    cgroup_prefix,
    own_cgroup,
    process_table,
)
from herder.supervisor.protocol import log_path, process_start_time
from tests.core.supervisor.helpers import alive, make_ctx, python, supervisor_pids
from tests.core.supervisor.test_processes import ESCAPE
from tests.support.waiting import wait_for

Spawn = Callable[..., ProcInfo]

# A child in a session of its own, and a grandchild double-forked into another; their pids, then wait.
ESCAPES = "setsid sleep 100 & echo $!; (setsid sleep 100 & echo $!); wait"

HIERARCHIES = {
    "v1-freezer": CGROUP_ROOT / "freezer",  # frozen while killed
    "v1-pids": CGROUP_ROOT / "pids",  # killed until empty
    "v2": CGROUP_ROOT / "unified" if (CGROUP_ROOT / "unified").is_dir() else CGROUP_ROOT,  # cgroup.kill
}


@pytest.fixture(params=list(HIERARCHIES))
def hierarchy(request: pytest.FixtureRequest) -> Path:
    path = HIERARCHIES[request.param]
    if os.geteuid() != 0 or not (path / "cgroup.procs").is_file():
        pytest.skip(f"needs root and a cgroup hierarchy at {path}")
    return path


@pytest.fixture
def cgroup(hierarchy: Path) -> Iterator[Cgroup]:
    cgroup = Cgroup.create(hierarchy / f"herder-test-{uuid.uuid4().hex}", own_cgroup(hierarchy))
    yield cgroup
    wait_for(cgroup.release, what=f"{cgroup.path} removed")
    assert not cgroup.path.exists()


def start(tree: ProcessTree, script: str, env: dict[str, str], **options: object) -> subprocess.Popen[str]:
    with tree.spawning():
        proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                env=env, start_new_session=True, **options)  # type: ignore[call-overload]
    tree.started(proc.pid)
    return proc  # type: ignore[no-any-return]


def read_pids(proc: subprocess.Popen[str], count: int) -> list[int]:
    assert proc.stdout is not None
    return [int(proc.stdout.readline()) for _ in range(count)]


def test_a_cgroup_holds_and_signals_every_process_whatever_its_session(cgroup: Cgroup,
                                                                      task_env: dict[str, str]) -> None:
    leader = start(cgroup, ESCAPES, task_env, user="nobody")
    assert os.getpid() not in cgroup.pids()  # the starter went back where it was
    escapees = read_pids(leader, 2)
    wait_for(lambda: len({os.getsid(pid) for pid in [leader.pid, *escapees]}) == 3, what="three sessions")
    assert {leader.pid, *escapees} <= set(cgroup.pids())
    cgroup.signal(signal.SIGTERM)
    assert leader.wait(30) == -signal.SIGTERM
    wait_for(lambda: not any(alive(pid) for pid in escapees), what="the escapees took SIGTERM")


def test_a_cgroup_is_killed_while_it_forks(cgroup: Cgroup, task_env: dict[str, str]) -> None:
    leader = start(cgroup, "trap '' TERM INT; while :; do (setsid sleep 100 &); done", task_env)
    wait_for(lambda: len(cgroup.pids()) > 5, what="a few forks")
    cgroup.kill()
    assert leader.wait(30) == -signal.SIGKILL
    wait_for(lambda: not cgroup.pids(), what="the cgroup is empty")


def test_without_a_cgroup_the_tree_is_found_by_parentage_and_session(task_env: dict[str, str]) -> None:
    tree = SessionTree()
    assert tree.pids() == []  # nothing before the start (a session id of 0 is the kernel's threads)
    # A child in a session of its own; a grandchild double-forked in the task's session; a grandchild
    # double-forked into a session of its own, whose parent waits for a line on stdin before it exits.
    script = "setsid sleep 100 & echo $!; (sleep 100 & echo $!); (setsid sleep 100 & echo $!; read line); wait"
    leader = start(tree, script, task_env)
    try:
        escapees = read_pids(leader, 3)
        tree.scan(process_table())  # sees the last grandchild while its parent lives
        assert leader.stdin is not None
        leader.stdin.write("go\n")
        leader.stdin.close()

        def orphaned() -> bool:  # its parent, the leader's child, has exited
            table = process_table()
            parent = table[escapees[2]].ppid
            return parent not in table or table[parent].ppid != leader.pid

        wait_for(orphaned, what="the last grandchild is an orphan")
        assert {leader.pid, *escapees} <= set(tree.pids())
        tree.signal(signal.SIGTERM)
        assert leader.wait(30) == -signal.SIGTERM
        wait_for(lambda: not any(alive(pid) for pid in escapees), what="the escapees took SIGTERM")
        assert tree.release()
    finally:
        tree.kill()
        leader.kill()
        leader.wait()


def test_the_own_cgroup_is_the_one_proc_names(hierarchy: Path) -> None:
    home = own_cgroup(hierarchy)
    assert os.getpid() in [int(pid) for pid in (home / "cgroup.procs").read_text().split()]
    with pytest.raises(ValueError, match="not a cgroup hierarchy"):
        own_cgroup(Path("/nonexistent"))


def test_only_root_with_a_writable_hierarchy_gets_cgroups(tmp_path: Path) -> None:
    assert cgroup_hierarchy(tmp_path) is None  # nothing mounted there
    (tmp_path / "freezer").mkdir()
    (tmp_path / "freezer" / "cgroup.procs").touch()
    assert cgroup_hierarchy(tmp_path) == (tmp_path / "freezer" if os.geteuid() == 0 else None)
    (tmp_path / "cgroup.controllers").touch()  # a unified hierarchy: it is used, not v1's
    (tmp_path / "cgroup.procs").touch()
    assert cgroup_hierarchy(tmp_path) == (tmp_path if os.geteuid() == 0 else None)


# -- through the supervisor --------------------------------------------------------------------------


@pytest.fixture(params=["auto", "v2"])
def cgroups(request: pytest.FixtureRequest, start_supervisor: Callable[..., None]) -> Path:
    """The supervisor of the test's data dir, started with its cgroups where auto-detection puts them or in v2."""
    path = cgroup_hierarchy() if request.param == "auto" else HIERARCHIES["v2"]
    if path is None or os.geteuid() != 0 or not (path / "cgroup.procs").is_file():
        pytest.skip("needs root and a writable cgroup hierarchy")
    start_supervisor("--cgroups", str(path))
    return path


def test_the_leaders_exit_takes_every_process_of_its_cgroup(connect: Callable[..., Supervisor], spawn: Spawn,
                                                            logs_dir: Path, data_dir: Path, cgroups: Path) -> None:
    supervisor = connect()
    info = spawn(supervisor, "t1", python(ESCAPE))
    assert info.cgroup is not None
    cgroup = Path(info.cgroup)
    assert cgroup.parent == cgroups and cgroup.name.startswith(cgroup_prefix(data_dir))
    # The child in a session of its own held the pipes; it was killed with the task, so no drain delay.
    assert supervisor.wait("t1", timeout=30) == ExitInfo(0, 0)
    assert "holds the pipe" not in log_path(data_dir).read_text()
    assert (logs_dir / "web.stdout.0").read_bytes() == b"started\n"
    wait_for(lambda: not cgroup.exists(), what="the cgroup is removed")
    supervisor.forget("t1")


def test_a_stop_reaches_every_process_of_its_cgroup(connect: Callable[..., Supervisor], spawn: Spawn,
                                                    logs_dir: Path, cgroups: Path) -> None:
    supervisor = connect()
    info = spawn(supervisor, "t1", ["sh", "-c", ESCAPES])
    wait_for(lambda: (logs_dir / "web.stdout.0").read_bytes().count(b"\n") == 2, what="the escapees' pids")
    escapees = [int(line) for line in (logs_dir / "web.stdout.0").read_text().split()]
    supervisor.stop("t1", signal.SIGTERM, 10)
    assert supervisor.wait("t1", timeout=30) == ExitInfo(128 + signal.SIGTERM, signal.SIGTERM)
    supervisor.forget("t1")
    wait_for(lambda: not any(alive(pid) for pid in escapees), what="the escapees are gone")
    assert info.cgroup is not None
    cgroup = Path(info.cgroup)
    wait_for(lambda: not cgroup.exists(), what="the cgroup is removed")


def test_a_new_supervisor_kills_what_a_killed_one_left_in_its_cgroups(
    connect: Callable[..., Supervisor], spawn: Spawn, logs_dir: Path, data_dir: Path, cgroups: Path,
    start_supervisor: Callable[..., None]
) -> None:
    supervisor = connect()
    info = spawn(supervisor, "t1", ["sh", "-c", ESCAPES])
    wait_for(lambda: (logs_dir / "web.stdout.0").read_bytes().count(b"\n") == 2, what="the escapees' pids")
    escapees = [int(line) for line in (logs_dir / "web.stdout.0").read_text().split()]
    os.kill(supervisor.pid, signal.SIGKILL)
    wait_for(lambda: not supervisor_pids(data_dir), what="the supervisor is gone")
    start_supervisor("--cgroups", str(cgroups))
    wait_for(lambda: not any(alive(pid) for pid in [info.pid, *escapees]), what="the orphans are gone")
    assert info.cgroup is not None
    cgroup = Path(info.cgroup)
    wait_for(lambda: not cgroup.exists(), what="the old cgroup is removed")


def test_without_cgroups_a_stop_reaches_a_child_in_a_session_of_its_own(
    connect: Callable[..., Supervisor], spawn: Spawn, logs_dir: Path, start_supervisor: Callable[..., None]
) -> None:
    start_supervisor("--cgroups", "none")
    supervisor = connect()
    info = spawn(supervisor, "t1", ["sh", "-c", "setsid sleep 100 & echo $!; wait"])
    assert info.cgroup is None
    wait_for(lambda: (logs_dir / "web.stdout.0").read_bytes().endswith(b"\n"), what="the child's pid")
    child = int((logs_dir / "web.stdout.0").read_text())
    supervisor.stop("t1", signal.SIGTERM, 10)
    assert supervisor.wait("t1", timeout=30) == ExitInfo(128 + signal.SIGTERM, signal.SIGTERM)
    supervisor.forget("t1")
    wait_for(lambda: not alive(child), what="the child is gone")


def test_recover_kills_every_process_of_an_orphans_cgroup(connect: Callable[..., Supervisor], data_dir: Path,
                                                          tmp_path: Path, task_env: dict[str, str]) -> None:
    hierarchy = cgroup_hierarchy()
    if hierarchy is None:
        pytest.skip("needs root and a writable cgroup hierarchy")
    ctx = make_ctx(tmp_path, connect())
    # What a supervisor killed with SIGKILL leaves: a task in a cgroup nobody watches.
    cgroup = Cgroup.create(hierarchy / f"{cgroup_prefix(data_dir)}gone-0", own_cgroup(hierarchy))
    leader = start(cgroup, "setsid sleep 100 & echo $!; wait", task_env)
    [child] = read_pids(leader, 1)
    state = {"supervisor": {"id": "alloc1.web.gone", "pid": leader.pid,
                            "start_time": process_start_time(leader.pid), "cgroup": str(cgroup.path)}}
    assert SupervisedProcess.recover(ctx, state) is None
    assert leader.wait(30) == -signal.SIGKILL
    assert not alive(child) and not cgroup.path.exists()


def test_the_handle_state_names_the_cgroup(connect: Callable[..., Supervisor], tmp_path: Path,
                                           task_env: dict[str, str]) -> None:
    ctx = make_ctx(tmp_path, connect())
    handle = SupervisedProcess.spawn(Task(name="web", driver="raw_exec"), ctx, ["sleep", "100"], env=task_env,
                                     cwd=ctx.task_dir.dir)
    saved = handle.state()["supervisor"]
    handle.kill(5)
    if cgroup_hierarchy() is None:
        assert "cgroup" not in saved
    else:
        assert Path(saved["cgroup"]).parent == cgroup_hierarchy()
        wait_for(lambda: not Path(saved["cgroup"]).exists(), what="the cgroup is removed")
