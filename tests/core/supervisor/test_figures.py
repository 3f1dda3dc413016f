"""Supervisor.figures(): its processes and the bytes of output it took, as the agent's metrics show them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from herder.supervisor import ProcInfo, Supervisor

Spawn = Callable[..., ProcInfo]


def test_figures_count_processes_and_logged_bytes(connect: Callable[..., Supervisor], spawn: Spawn,
                                                  data_dir: Path) -> None:
    assert Supervisor(data_dir).figures() is None  # not connected: no supervisor is started for it
    supervisor = connect()
    spawn(supervisor, "quiet", ["sleep", "100"])
    spawn(supervisor, "loud", ["sh", "-c", "head -c 100000 /dev/zero; head -c 2345 /dev/zero >&2"])
    supervisor.wait("loud", timeout=30)
    figures = supervisor.figures()
    assert figures is not None
    assert (figures.running, figures.exited, figures.logged_bytes) == (1, 1, 102_345)
    supervisor.forget("loud")
    supervisor.stop("quiet", 15, 5.0)
    supervisor.wait("quiet", timeout=30)
    supervisor.forget("quiet")
    figures = supervisor.figures()
    assert figures is not None and (figures.running, figures.exited, figures.logged_bytes) == (0, 0, 102_345)
