"""raw_exec: runs a command as a plain process, without isolation.

Built into herder, but registered through herder's own ``herder.drivers``
entry point exactly like an external driver, and built on :mod:`herder.sdk`
alone. The task's process is started through the supervisor, so it outlives
herder and is found again after a restart; it leads its own process group and
inherits herder's environment minus secrets. With ``user`` set, the task and
everything run on its behalf (script checks, ``herder alloc exec``) run as
that user, with its groups and ``HOME``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from herder import (
    DriverCapabilities,
    DriverError,
    ExecResult,
    ExecSession,
    Fingerprint,
    Task,
    TaskContext,
    TaskHandle,
    hookimpl,
)
from herder.sdk import HostCommands, SupervisedProcess

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["command"],
    "additionalProperties": False,
}


class RawExecDriver:
    """The ``raw_exec`` driver. Configuration: ``enabled`` (default true)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.enabled = bool(config.get("enabled", True))
        self.host = HostCommands()

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        if not self.enabled:
            return Fingerprint(detected=True, healthy=False,
                               description="disabled (set [plugin.raw_exec] enabled = true)")
        return Fingerprint(detected=True, healthy=True, description="healthy")

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return SCHEMA

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        if not self.enabled:
            raise DriverError("raw_exec is disabled (set [plugin.raw_exec] enabled = true)")
        argv = [task.config["command"], *task.config.get("args", [])]
        return SupervisedProcess.spawn(task, ctx, argv, env=self.host.environment(task, ctx), cwd=ctx.task_dir.dir,
                                       user=task.user or None, host_paths=True,
                                       netns=ctx.network.path if ctx.network else None)

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        # The supervisor starts the task's process in the allocation's namespace.
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}))

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        return SupervisedProcess.recover(ctx, state)

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        return self.host.exec(task, ctx, command, timeout)

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        return self.host.exec_session(task, ctx, command, tty)
