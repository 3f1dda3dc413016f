"""A running JVM, as a herder task handle: the supervised process or exec's container, and which."""

from __future__ import annotations

from typing import Any, Literal

from herder import TaskHandle
from herder.sdk import DelegatingHandle

Mode = Literal["exec", "none"]
"""How a task's JVM runs: ``exec``, in herder-exec's runc container; ``none``, as a plain process."""

DESCRIPTIONS: dict[Mode, str] = {
    "exec": "JVM isolated in herder-exec's runc container",
    "none": "JVM as a plain supervised process, without isolation",
}


class JavaHandle(DelegatingHandle):
    """The handle of the JVM's process (a :class:`herder.sdk.SupervisedProcess`) or of its container
    (herder-exec's), which it passes every call on to, and the isolation it runs under: in ``state()``,
    so that recovery takes the same road, and in the ``Started`` event's details."""

    def __init__(self, inner: TaskHandle, isolation: Mode) -> None:
        super().__init__(inner, network=inner.network)
        self.isolation: Mode = isolation
        self.started_details = {"isolation": isolation, "description": DESCRIPTIONS[isolation]}

    def __repr__(self) -> str:
        return f"<JavaHandle {self.isolation} {self.inner!r}>"

    def state(self) -> dict[str, Any]:
        return {**self.inner.state(), "isolation": self.isolation}
