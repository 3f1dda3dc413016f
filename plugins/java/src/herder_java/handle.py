"""A running JVM, as a herder task handle: the supervised process or exec's container, and which."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from herder import DriverNetwork, ExitResult, TaskHandle, TaskStats

Mode = Literal["exec", "none"]
"""How a task's JVM runs: ``exec``, in herder-exec's runc container; ``none``, as a plain process."""

DESCRIPTIONS: dict[Mode, str] = {
    "exec": "JVM isolated in herder-exec's runc container",
    "none": "JVM as a plain supervised process, without isolation",
}


class JavaHandle:
    """The handle of the JVM's process (a :class:`herder.sdk.SupervisedProcess`) or of its container
    (herder-exec's), which it passes every call on to, and the isolation it runs under: in ``state()``,
    so that recovery takes the same road, and in the ``Started`` event's details."""

    def __init__(self, inner: TaskHandle, isolation: Mode) -> None:
        self.inner = inner
        self.isolation: Mode = isolation
        self.id = inner.id
        self.network: DriverNetwork | None = inner.network
        self.started_details = {"isolation": isolation, "description": DESCRIPTIONS[isolation]}

    def __repr__(self) -> str:
        return f"<JavaHandle {self.isolation} {self.inner!r}>"

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
        return {**self.inner.state(), "isolation": self.isolation}
