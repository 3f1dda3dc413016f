"""Another local user reads herder's files: the data dir, the state database, rendered templates.

And the other side of the same modes: a task running as ``nobody`` can still
write the shared ``alloc/data`` and read its own templates.
"""

from __future__ import annotations

import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess
from tests.support.consul import free_ports
from tests.support.foreground import HerderRun, task_dirs
from tests.support.processes import wait_until_gone
from tests.support.require import require_driver
from tests.support.waiting import wait_for

Herder = Callable[..., subprocess.CompletedProcess[str]]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def assert_state_is_private(data_dir: Path) -> None:
    wal = data_dir / "state.db-wal"
    wait_for(wal.exists, what="the state database's write-ahead log")
    for path in (data_dir / "state.db", wal, data_dir / "state.db-shm"):
        assert mode(path) == 0o600, f"{path}: {oct(mode(path))}"


SLEEPER = """
job "sleeper" {
  group "g" {
    task "t" {
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'exit 0' INT TERM; while :; do sleep 0.1; done"]
      }
      template {
        data        = "password=hunter2\\n"
        destination = "secrets/app.conf"
      }
      template {
        data        = "setting=1\\n"
        destination = "local/app.conf"
      }
    }
  }
}
"""


def test_herder_run_keeps_data_dir_state_and_templates_from_other_users(tmp_path: Path) -> None:
    job = tmp_path / "job.hcl"
    job.write_text(SLEEPER)
    data_dir = tmp_path / "data"
    run = HerderRun(job, data_dir)
    try:
        run.wait_for("Started", timeout=60)
        assert mode(data_dir) == 0o700
        assert_state_is_private(data_dir)
        task_dir = task_dirs(data_dir, "t")[0]
        for name in ("secrets/app.conf", "local/app.conf"):
            assert mode(task_dir / name) == 0o640, name
        assert mode(task_dir / "secrets") == 0o700
        assert mode(data_dir / "allocs") == mode(task_dir.parent) == 0o711
    finally:
        assert run.interrupt() == 0, run.stderr


def test_an_existing_world_readable_data_dir_and_state_are_made_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)
    (data_dir / "state.db").touch(mode=0o644)
    (data_dir / "state.db").chmod(0o644)
    job = tmp_path / "job.hcl"
    job.write_text(SLEEPER)
    run = HerderRun(job, data_dir)
    try:
        run.wait_for("Started", timeout=60)
        assert mode(data_dir) == 0o700
        assert_state_is_private(data_dir)
    finally:
        assert run.interrupt() == 0, run.stderr


def test_the_agent_data_dir_and_state_are_private(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path).start()
    try:
        assert mode(agent.data_dir) == 0o700
        assert_state_is_private(agent.data_dir)
        assert mode(agent.token_file) == 0o600  # the agent's own token, made at its first start
    finally:
        agent.shutdown()


NOBODY_WRITES = """
job "nobody" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "{driver}"
      {user}
      config {{
        command = "/bin/sh"
        args    = ["-c", "cd $NOMAD_ALLOC_DIR/data && cat $NOMAD_TASK_DIR/app.conf > out && id -u >> out"]
      }}
      template {{
        data        = "rendered"
        destination = "local/app.conf"
      }}
    }}
  }}
}}
"""


def run_as_nobody(herder: Herder, root: Path, driver: str, user: str = "") -> Path:
    """Run the job to the end with its data dir under ``root``; the data dir. The task, as nobody,
    copies its template into alloc/data."""
    job = root / "job.hcl"
    job.write_text(NOBODY_WRITES.format(driver=driver, user=f'user = "{user}"' if user else ""))
    config = root / "herder.toml"
    config.write_text(f'data_dir = "{root / "data"}"\n[ports]\nmin = 2000\nmax = 12000\n')
    result = herder("run", "--json", "--config", str(config), str(job), timeout=120)
    data_dir = root / "data"
    logs = {p.name: p.read_text() for p in (data_dir / "allocs").glob("*/alloc/logs/t.std*")}
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr, logs)
    out = next(iter((data_dir / "allocs").glob("*/alloc/data/out")))
    nobody = pwd.getpwnam("nobody").pw_uid
    assert out.read_text() == f"rendered{nobody}\n"
    assert out.stat().st_uid == nobody
    return data_dir


@pytest.fixture
def open_root() -> Iterator[Path]:
    """A directory nobody may pass through (pytest's own temporary directories are 0700)."""
    root = Path(tempfile.mkdtemp(prefix="herder-modes-"))
    root.chmod(0o711)
    try:
        yield root
    finally:
        assert not wait_until_gone(root), "processes left behind"
        shutil.rmtree(root)


def test_a_raw_exec_task_as_nobody_writes_alloc_data_through_a_traversable_data_dir(
        herder: Herder, open_root: Path) -> None:
    data_dir = run_as_nobody(herder, open_root, "raw_exec", user="nobody")
    # its process reaches $NOMAD_TASK_DIR by the host's path, as nobody: the data dir must let it through
    assert mode(data_dir) == 0o711


@pytest.mark.parametrize("user", ["", "nobody"], ids=["default-user", "user-nobody"])
def test_an_exec_task_as_nobody_writes_alloc_data_with_the_data_dir_kept_private(
        herder: Herder, tmp_path: Path, user: str) -> None:
    require_driver("exec")
    data_dir = run_as_nobody(herder, tmp_path, "exec", user=user)  # exec's default user is nobody
    # runc (root) makes the bind mounts: the container's user never walks the host's path to them,
    # here not even to pytest's 0700 temporary directory above the data dir
    assert mode(data_dir) == 0o700


@pytest.mark.parametrize("squat", ["made-by-nobody", "under-a-dir-all-may-write"])
def test_the_agent_refuses_a_data_dir_another_user_can_change(squat: str) -> None:
    """A data dir under a shared directory: another user made it first (a chmod leaves it theirs), or
    may rename it away, and would then swap ``state.db`` (the jobs herder runs) or ``agent.token``.
    The agent and ``herder run`` both refuse it, naming it."""
    root = Path(tempfile.mkdtemp(prefix="herder-squat-"))
    try:
        data_dir = root / "data"
        if squat == "made-by-nobody":
            root.chmod(0o1777)  # as /tmp
            subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "mkdir", "-m", "0700",
                            str(data_dir)], check=True)
            refused = data_dir
        else:
            root.chmod(0o777)
            refused = root
        config = root / "agent.toml"
        config.write_text(f'data_dir = "{data_dir}"\n')
        done = subprocess.run([sys.executable, "-m", "herder", "agent", "--config", str(config), "--bind",
                               f"127.0.0.1:{free_ports(1)[0]}"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 1, done.stderr
        assert f"{refused}: " in done.stderr and "Traceback" not in done.stderr, done.stderr
        job = root / "job.hcl"
        job.write_text(SLEEPER)
        ran = subprocess.run([sys.executable, "-m", "herder", "run", "--data-dir", str(data_dir), str(job)],
                             capture_output=True, text=True, timeout=60)
        assert ran.returncode == 2, ran.stderr
        assert f"{refused}: " in ran.stderr and "internal error" not in ran.stderr, ran.stderr
        assert not (data_dir / "agent.token").exists() and not (data_dir / "state.db").exists()
    finally:
        shutil.rmtree(root)
