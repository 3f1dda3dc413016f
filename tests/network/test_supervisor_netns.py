"""A supervised process, and a command run beside its task, in a network namespace given by path."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.sdk.process import run_capped
from herder.supervisor import Supervisor, SupervisorError

NAMESPACE_OF_SELF = ["readlink", "/proc/self/ns/net"]


def _namespace(path: Path | str) -> str:
    """How ``/proc/PID/ns/net`` names the namespace at ``path`` (its inode)."""
    return f"net:[{os.stat(path).st_ino}]"


def _spawn(supervisor: Supervisor, id: str, argv: list[str], logs: Path, **options: object) -> None:
    supervisor.spawn(id, argv, env={"PATH": "/usr/bin:/bin"}, cwd=None, logs_dir=logs, task=id, max_files=2,
                     max_file_size=1, stop_signal=signal.SIGTERM, kill_timeout=5.0, **options)  # type: ignore[arg-type]


@pytest.fixture
def supervisor(data_dir: Path) -> Iterator[Supervisor]:
    client = Supervisor(data_dir)
    client.connect()
    yield client
    client.close()


def test_the_process_runs_in_the_namespace_and_the_supervisor_stays_out(
        supervisor: Supervisor, netns: Path, tmp_path: Path) -> None:
    own = _namespace("/proc/self/ns/net")
    assert _namespace(netns) != own
    for id, user, namespace in (("root", None, netns), ("nobody", "nobody", netns), ("host", None, None)):
        _spawn(supervisor, id, NAMESPACE_OF_SELF, tmp_path, user=user, netns=namespace)
        assert supervisor.wait(id, timeout=30) is not None
        supervisor.forget(id)
        expected = _namespace(namespace) if namespace else own
        assert (tmp_path / f"{id}.stdout.0").read_text().strip() == expected, id
    # The supervisor went back to its own namespace after each start.
    assert _namespace(f"/proc/{supervisor.pid}/ns/net") == own


def test_a_path_that_is_no_network_namespace_is_refused(supervisor: Supervisor, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("")
    for path, reason in ((plain, "cannot enter the network namespace"),
                         (tmp_path / "missing", "cannot open the network namespace")):
        with pytest.raises(SupervisorError, match=reason):
            _spawn(supervisor, "bad", NAMESPACE_OF_SELF, tmp_path, netns=path)
    assert supervisor.list() == []


def test_a_command_beside_the_task_runs_in_the_namespace(netns: Path) -> None:
    result = run_capped(NAMESPACE_OF_SELF, env=None, cwd=None, timeout=30, netns=netns)
    assert result.output.decode().strip() == _namespace(netns)
    assert _namespace("/proc/thread-self/ns/net") == _namespace("/proc/self/ns/net")
