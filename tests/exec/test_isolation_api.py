"""herder-exec's public isolation API (herder_exec.isolation), as another driver uses it: paths as the
task sees them, more read-only directories, the working directory and the default stop signal."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest

from herder import DriverError, RecoverableError, TaskContext
from herder.context import TaskDir
from herder.testing import DriverHarness
from herder.testing.plugin import HarnessFactory
from tests.support.waiting import wait_for

from .helpers import sh

try:
    from herder_exec import bundle
    from herder_exec.isolation import Isolation, check_data_dir
except ImportError:  # the fixtures skip (or fail, under HERDER_REQUIRE) first
    pass


def task_dir(root: Path) -> TaskDir:
    dirs = {name: root / "t" / name for name in ("local", "secrets", "tmp")}
    return TaskDir(dir=root / "t", local_dir=dirs["local"], secrets_dir=dirs["secrets"], tmp_dir=dirs["tmp"],
                   alloc_dir=root / "alloc", logs_dir=root / "alloc" / "logs")


def test_paths_as_the_task_sees_them_and_back(exec_driver: str, tmp_path: Path) -> None:
    ctx = cast(TaskContext, SimpleNamespace(task_dir=task_dir(tmp_path)))  # all the path mapping reads
    assert Isolation.task_path(ctx, tmp_path / "t" / "local" / "app.jar") == "/local/app.jar"
    assert Isolation.task_path(ctx, tmp_path / "alloc" / "data" / "x") == "/alloc/data/x"
    with pytest.raises(ValueError, match="not in local/, secrets/, tmp/ or alloc/"):
        Isolation.task_path(ctx, tmp_path / "t" / "bundle")
    assert Isolation.host_path(ctx, "/secrets/key") == tmp_path / "t" / "secrets" / "key"
    assert Isolation.host_path(ctx, "/etc/passwd") is None


def test_read_only_directories_are_bound_after_the_task_dirs_unless_a_system_dir_has_them(exec_driver: str,
                                                                                         tmp_path: Path) -> None:
    user = bundle.User.lookup("nobody")
    spec = bundle.spec(["/bin/true"], {}, user, task_dirs={"/tmp": tmp_path / "tmp"}, cgroups_path="/x",
                       cpu_shares=2, pids_limit=0, read_only=[tmp_path / "jdk", Path("/usr/lib/jvm")], cwd="/local")
    destinations = [mount["destination"] for mount in spec["mounts"]]
    assert destinations.index(str(tmp_path / "jdk")) > destinations.index("/tmp")
    assert "/usr/lib/jvm" not in destinations
    [jdk] = [mount for mount in spec["mounts"] if mount["destination"] == str(tmp_path / "jdk")]
    assert "ro" in jdk["options"] and jdk["source"] == str(tmp_path / "jdk")
    assert spec["process"]["cwd"] == "/local"


@pytest.fixture
def harness(exec_driver: str, driver_harness: HarnessFactory) -> DriverHarness:
    return driver_harness("exec", {})


def test_another_program_with_a_read_only_directory_a_working_directory_and_sigterm(harness: DriverHarness,
                                                                                     tmp_path: Path) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    (runtime / "version").write_text("1.0\n")
    tmp_path.chmod(0o755)
    script = (f"pwd; cat {runtime}/version; touch {runtime}/x 2>&1 | grep -o 'Read-only file system'; "
              "trap 'echo TERM; exit 0' TERM; echo ready > /local/ready; while :; do sleep 0.1; done")
    # The exec driver's task places the task; the program it runs is the API's, as another driver's would be.
    run = harness.task({"command": "/bin/true"}, kill_timeout="5s")
    run.prestart()
    isolation = Isolation({})
    handle = isolation.start(run.task, run.ctx, ["/bin/sh", "-c", script], read_only=[runtime], cwd="/local",
                             default_signal=signal.SIGTERM)
    try:
        wait_for(lambda: run.local_file("ready").is_file(),
                 what=lambda: f"the task ready; stderr {run.output('stderr')!r}")
        assert isolation.exec(handle, ["/bin/cat", "/local/ready"], 10).output == b"ready\n"
        assert isolation.recover(run.ctx, handle.state(), default_signal=signal.SIGTERM) is not None
        handle.kill(5, None)
        result = handle.wait(10)
        assert result is not None and result.exit_code == 0, result
        assert run.output().decode().split() == ["/local", "1.0", "Read-only", "file", "system", "TERM"]
    finally:
        isolation.cleanup(run.ctx)
    assert not (run.ctx.task_dir.dir / "bundle").exists()


def test_the_binds_a_path_lies_in_are_found_on_resolved_paths(exec_driver: str, tmp_path: Path) -> None:
    assert bundle.binding(Path("/usr/local/herder")) == "/usr"
    assert bundle.binding(tmp_path / "data") is None
    # A link into a bound directory is seen through: the task would see what it leads to.
    (tmp_path / "link").symlink_to("/usr/local")
    assert bundle.binding(tmp_path / "link" / "herder") == "/usr"
    # A read-only directory of the caller's (a JDK) is bound as well.
    assert bundle.binding(tmp_path / "jdk" / "data", [tmp_path / "jdk"]) == str(tmp_path / "jdk")
    assert bundle.binding(tmp_path / "data", [tmp_path / "jdk"]) is None
    for system in bundle.SYSTEM_DIRS:
        if os.path.islink(system):  # a merged-/usr host's /lib -> usr/lib: not bound, what it leads to is
            assert system not in bundle.system_binds()
            assert bundle.binding(Path(system) / "herder") == os.path.dirname(os.path.realpath(system))


def test_a_task_dir_in_a_bound_directory_is_refused_naming_the_data_dir(exec_driver: str, tmp_path: Path) -> None:
    data_dir = Path("/usr/local/herder")
    ctx = cast(TaskContext, SimpleNamespace(task_dir=task_dir(data_dir / "allocs" / "a1")))
    with pytest.raises(DriverError, match=r"^the data dir /usr/local/herder is under /usr, which exec binds into "
                                          r"every task: move the data dir$"):
        check_data_dir(ctx)
    ctx = cast(TaskContext, SimpleNamespace(task_dir=task_dir(tmp_path / "data" / "allocs" / "a1")))
    check_data_dir(ctx)
    with pytest.raises(DriverError, match=f"the data dir {tmp_path / 'data'} is under {tmp_path}, "):
        check_data_dir(ctx, [tmp_path])


@pytest.fixture
def bound_data_dir() -> Iterator[Path]:
    """A data dir in /usr/local, which exec binds into every task; removed afterwards."""
    parent = Path(tempfile.mkdtemp(prefix="herder-test-", dir="/usr/local"))
    try:
        yield parent / "data"
    finally:
        shutil.rmtree(parent)


def test_an_exec_task_with_the_data_dir_in_a_bound_directory_does_not_start(exec_driver: str,
                                                                            bound_data_dir: Path) -> None:
    with DriverHarness("exec", {}, data_dir=bound_data_dir) as harness:
        run = harness.task(sh("ls -a /usr/local; sleep 60"))
        with pytest.raises(DriverError, match=f"^the data dir {bound_data_dir} is under /usr, which exec binds "
                                              "into every task: move the data dir$") as refused:
            run.start()
        assert not isinstance(refused.value, RecoverableError)
        assert run.handle is None
