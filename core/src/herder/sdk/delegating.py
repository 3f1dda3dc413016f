"""A driver's task handle that passes the calls it does not change on to another handle."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herder.objects import DriverNetwork, ExitResult, TaskHandle, TaskStats


class DelegatingHandle:
    """A task handle around ``inner`` (a :class:`herder.sdk.SupervisedProcess`, most often):
    ``wait``, ``on_exit``, ``signal``, ``kill``, ``stats`` and ``state`` are the inner
    handle's, so that a driver's handle overrides only what its task does differently
    (a VM powered off through its monitor, a pod's UUID in ``state()``).

    ``id`` is the inner handle's unless given; ``network`` is None (the host's ports)
    unless given.
    """

    def __init__(self, inner: TaskHandle, *, id: str | None = None, network: DriverNetwork | None = None) -> None:
        self.inner = inner
        self.id = inner.id if id is None else id
        self.network = network

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.inner!r}>"

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        return self.inner.wait(timeout)

    def on_exit(self, callback: Callable[[], None]) -> bool:
        """The inner handle's ``on_exit`` (see :class:`herder.TaskHandle`); False if it has none."""
        on_exit = getattr(self.inner, "on_exit", None)
        return bool(callable(on_exit) and on_exit(callback))

    def signal(self, sig: int) -> None:
        self.inner.signal(sig)

    def kill(self, timeout: float, sig: int | None = None) -> None:
        self.inner.kill(timeout, sig)

    def stats(self) -> TaskStats | dict[str, Any] | None:
        return self.inner.stats()

    def state(self) -> dict[str, Any]:
        return self.inner.state()
