"""A running pod, as a herder task handle: ``rkt run`` in the foreground, supervised."""

from __future__ import annotations

import contextlib
import signal
from typing import Any

from herder import TaskStats
from herder.sdk import DelegatingHandle, SupervisedProcess
from herder_rkt.cli import Rkt, RktError

FORCE_KILL_WAIT = 5.0
"""How long the pod has to be gone after ``rkt stop --force`` before the supervisor kills what is left."""


class RktHandle(DelegatingHandle):
    """A task of the rkt driver: the pod ``id`` (its UUID), run by ``rkt run`` through the supervisor.

    ``rkt run`` becomes the app's process (rkt execs stage1, which execs the
    app), so waiting for it is waiting for the pod, and its exit status is
    the app's: the only place rkt reports it (``rkt status`` does not). It
    leads its own process group, which is also the group rkt records for
    the pod, so the supervisor's signals reach the app and its children
    (``rkt stop`` only knows SIGTERM, to the app alone). The ports are the
    host's (see the driver's prestart): no ``network``.
    """

    def __init__(self, proc: SupervisedProcess, rkt: Rkt, uuid: str) -> None:
        super().__init__(proc, id=uuid)
        self.inner: SupervisedProcess = proc
        self._rkt = rkt

    def __repr__(self) -> str:
        return f"<RktHandle pod {self.id} pid={self.inner.pid}>"

    def kill(self, timeout: float, sig: int | None = None) -> None:
        """``sig`` (default SIGTERM, as ``rkt stop``) to the app and its children, up to ``timeout`` s to
        exit, then ``rkt stop --force``; what still runs after that the supervisor kills."""
        self.signal(signal.SIGTERM if sig is None else sig)
        if self.wait(timeout) is not None:
            return
        with contextlib.suppress(RktError):  # the supervisor's SIGKILL below ends it all the same
            self._rkt.stop(self.id, force=True)
        if self.wait(FORCE_KILL_WAIT) is None:
            self.inner.kill(0, signal.SIGKILL)
            self.wait()

    def stats(self) -> TaskStats | None:
        """The processes of ``rkt run`` and of the pod it runs (stage1 fly: the app's, on the host)."""
        return self.inner.stats()

    def state(self) -> dict[str, Any]:
        """The supervisor's record of ``rkt run``, and the pod's UUID."""
        return {**self.inner.state(), "pod": self.id}
