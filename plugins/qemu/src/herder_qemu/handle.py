"""A running virtual machine, as a herder task handle: QEMU's process, supervised."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder import DriverNetwork, ExitResult, TaskStats
from herder.sdk import SupervisedProcess
from herder_qemu.qmp import QmpError, powerdown

QMP_TIMEOUT = 2.0
"""How long QEMU's monitor has to take the power-off request."""


class QemuHandle:
    """A task of the qemu driver: QEMU in the foreground, through the supervisor.

    QEMU's exit is the task's exit (0 once the guest powered off), its
    output the task's output (the guest's serial console). Without
    ``graceful_shutdown`` it is stopped like any process: its ``kill_signal``
    makes QEMU end the virtual machine at once. With it, the guest's power
    button is pressed through QMP and the guest has ``kill_timeout`` to
    power off before QEMU is killed.
    """

    def __init__(self, proc: SupervisedProcess, monitor: Path, graceful_shutdown: bool) -> None:
        self.id = proc.id
        self.network: DriverNetwork | None = None  # the guest's address is QEMU's own: ports are the host's
        self.monitor = monitor
        self.graceful_shutdown = graceful_shutdown
        self._proc = proc

    def __repr__(self) -> str:
        return f"<QemuHandle {self.id} pid={self._proc.pid}>"

    @property
    def pid(self) -> int:
        return self._proc.pid

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        return self._proc.wait(timeout)

    def on_exit(self, callback: Callable[[], None]) -> bool:
        """Call ``callback`` once the task has exited, from the supervisor's notice (see :class:`herder.TaskHandle`)."""
        return self._proc.on_exit(callback)

    def signal(self, sig: int) -> None:
        """Send ``sig`` to QEMU (SIGINT, SIGTERM and SIGHUP make it stop the machine and exit)."""
        self._proc.signal(sig)

    def kill(self, timeout: float, sig: int | None = None) -> None:
        """Power the guest off through QMP (with ``graceful_shutdown``), else send ``sig``; SIGKILL after
        ``timeout`` s. Should the monitor not answer, the signal is sent instead."""
        if self.graceful_shutdown:
            try:
                powerdown(self.monitor, min(QMP_TIMEOUT, timeout) or QMP_TIMEOUT)
            except QmpError:
                pass  # QEMU is on its way out, or its monitor is broken: stop it as any process
            else:
                if self._proc.wait(timeout) is None:
                    self._proc.kill(0, signal.SIGKILL)
                    self._proc.wait()
                return
        self._proc.kill(timeout, sig)

    def stats(self) -> TaskStats | None:
        return self._proc.stats()

    def state(self) -> dict[str, Any]:
        """The supervisor's record of QEMU's process, and where its monitor listens."""
        return {**self._proc.state(), "monitor": str(self.monitor), "graceful_shutdown": self.graceful_shutdown}
