"""The exec driver: a program of the host, isolated in a runc container, supervised like any task process.

Each start writes an OCI bundle into the task directory (``bundle/``:
``config.json`` and an empty ``rootfs`` for runc to mount the host's system
directories and the task's directories onto), creates the cgroup holding
the memory limit (see :mod:`herder_exec.cgroups`), and runs ``runc run`` in
the foreground through :class:`herder.sdk.SupervisedProcess`: runc's
process is the task for the supervisor, its output the task's output, and
it outlives herder with the container. In a group with a network of its
own (``network { mode = "bridge" }``) the container joins the allocation's
namespace, with the network's hostname and DNS. All of it is
:class:`herder_exec.isolation.Isolation`, which other drivers use too; the
driver adds its task configuration: ``command`` and ``args``, ``work_dir``,
``pid_mode`` and ``ipc_mode``, ``cap_add`` and ``cap_drop``.
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
from herder_exec.config import TASK_SCHEMA, TaskConfig
from herder_exec.isolation import Isolation


class ExecDriver:
    """The ``exec`` driver; herder creates it with the ``[plugin.exec]`` table."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.isolation = Isolation(config)

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        return self.isolation.fingerprint()

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return TASK_SCHEMA

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        """The container joins its allocation's network namespace (runc's network namespace ``path``), and
        mounts host volumes."""
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}), volume_mounts=True)

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        """The task sees its directories where the container mounts them."""
        self.isolation.prepare(ctx)

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        config = TaskConfig.from_mapping(task.config)
        try:
            capabilities = self.isolation.config.capabilities(config.cap_add, config.cap_drop)
        except ValueError as exc:
            raise DriverError(str(exc)) from None
        return self.isolation.start(task, ctx, [config.command, *config.args], cwd=config.work_dir,
                                    pid_mode=config.pid_mode, ipc_mode=config.ipc_mode, capabilities=capabilities)

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        return self.isolation.recover(ctx, state)

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        return self.isolation.exec(handle, command, timeout)

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        return self.isolation.exec_session(handle, command, tty)

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        """Remove the container, its cgroup and its bundle (each step a no-op once done)."""
        self.isolation.cleanup(ctx)
