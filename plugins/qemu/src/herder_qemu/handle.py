"""A running virtual machine, as a herder task handle: QEMU's process, supervised."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from herder import TaskStats
from herder.sdk import DelegatingHandle, SupervisedProcess
from herder_qemu.qmp import QmpError, powerdown

QMP_TIMEOUT = 2.0
"""How long QEMU's monitor has to take the power-off request."""


class QemuHandle(DelegatingHandle):
    """A task of the qemu driver: QEMU in the foreground, through the supervisor.

    QEMU's exit is the task's exit (0 once the guest powered off), its
    output the task's output (the guest's serial console). Without
    ``graceful_shutdown`` it is stopped like any process: its ``kill_signal``
    makes QEMU end the virtual machine at once. With it, the guest's power
    button is pressed through QMP and the guest has ``kill_timeout`` to
    power off before QEMU is killed. The guest's address is QEMU's own: the
    ports are the host's (no ``network``).
    """

    def __init__(self, proc: SupervisedProcess, monitor: Path, graceful_shutdown: bool) -> None:
        super().__init__(proc)
        self.inner: SupervisedProcess = proc
        self.monitor = monitor
        self.graceful_shutdown = graceful_shutdown

    def __repr__(self) -> str:
        return f"<QemuHandle {self.id} pid={self.inner.pid}>"

    @property
    def pid(self) -> int:
        return self.inner.pid

    def kill(self, timeout: float, sig: int | None = None) -> None:
        """Power the guest off through QMP (with ``graceful_shutdown``), else send ``sig``; SIGKILL after
        ``timeout`` s. Should the monitor not answer, the signal is sent instead. (SIGINT, SIGTERM and
        SIGHUP make QEMU stop the machine and exit.)"""
        if self.graceful_shutdown:
            try:
                powerdown(self.monitor, min(QMP_TIMEOUT, timeout) or QMP_TIMEOUT)
            except QmpError:
                pass  # QEMU is on its way out, or its monitor is broken: stop it as any process
            else:
                if self.inner.wait(timeout) is None:
                    self.inner.kill(0, signal.SIGKILL)
                    self.inner.wait()
                return
        self.inner.kill(timeout, sig)

    def stats(self) -> TaskStats | None:
        return self.inner.stats()

    def state(self) -> dict[str, Any]:
        """The supervisor's record of QEMU's process, and where its monitor listens."""
        return {**self.inner.state(), "monitor": str(self.monitor), "graceful_shutdown": self.graceful_shutdown}
