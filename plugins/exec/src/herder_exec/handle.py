"""A running container, as a herder task handle: runc's foreground process, supervised."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder import DriverNetwork, ExitResult, TaskStats
from herder.sdk import SupervisedProcess, cgroup_stats
from herder_exec.cgroups import TaskCgroup
from herder_exec.runc import Runc

FORCE_KILL_WAIT = 10.0
"""How long the container has to be gone after SIGKILL before runc's own process is killed."""


class ExecHandle:
    """A task of the exec driver: ``runc run`` in the foreground, through the supervisor.

    ``runc run`` lives as long as the container's init and exits with its
    exit code, so waiting for it is waiting for the task, and its output is
    the task's. Signals go through ``runc kill`` to the container's init;
    the final SIGKILL to the init ends its whole PID namespace.
    """

    def __init__(self, proc: SupervisedProcess, runc: Runc, container: str, bundle: Path, cgroup: TaskCgroup, *,
                 default_signal: int = signal.SIGINT) -> None:
        self.id = container
        self.network: DriverNetwork | None = None  # the host's network: ports are the host's
        self.bundle = bundle
        self.cgroup = cgroup
        self._proc = proc
        self._runc = runc
        self._default_signal = default_signal
        self._forced = False
        self._lock = threading.Lock()
        self._result: ExitResult | None = None
        cgroup.watch()

    def __repr__(self) -> str:
        return f"<ExecHandle {self.id} runc pid={self._proc.pid}>"

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        if self._result is not None:
            return self._result
        result = self._proc.wait(timeout)
        if result is None:
            return None
        sig = result.signal
        # runc exits with 128 + n when the container's init died of signal n, as a shell reports it.
        if not sig and 128 < result.exit_code <= 128 + signal.NSIG:
            sig = result.exit_code - 128
        oom = self.cgroup.oom_killed(init_sigkilled=sig == signal.SIGKILL and not self._forced)
        with self._lock:
            if self._result is None:
                self._result = ExitResult(exit_code=result.exit_code, signal=sig, oom_killed=oom, error=result.error)
            return self._result

    def on_exit(self, callback: Callable[[], None]) -> bool:
        """Call ``callback`` once the task has exited, from the supervisor's notice (see :class:`herder.TaskHandle`)."""
        return self._proc.on_exit(callback)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the container's init (nothing once it has exited)."""
        self._runc.kill(self.id, sig)

    def kill(self, timeout: float, sig: int | None = None) -> None:
        """``sig`` (None: the default signal, SIGINT unless told) to the init, up to ``timeout`` s to exit,
        then SIGKILL to the init.

        Should runc fail to end the container, runc's own process is killed,
        and cleanup's ``runc delete --force`` removes what is left.
        """
        self.signal(self._default_signal if sig is None else sig)
        if self.wait(timeout) is not None:
            return
        self._forced = True
        self._runc.kill(self.id, signal.SIGKILL)
        if self.wait(FORCE_KILL_WAIT) is None:
            self._proc.kill(0, signal.SIGKILL)
            self.wait()

    def stats(self) -> TaskStats | None:
        """The container's cgroups: memory (usage, limit, RSS) and CPU of the driver's, throttling of runc's."""
        stats = cgroup_stats(self.cgroup.relative, self.cgroup.runc_path)
        return None if stats.memory_usage_bytes is None else stats

    def state(self) -> dict[str, Any]:
        """The supervisor's record of runc's process, and the container and bundle it runs."""
        return {**self._proc.state(), "container": self.id, "bundle": str(self.bundle)}
