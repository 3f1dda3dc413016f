"""What a driver whose task is a plain process of the host runs beside it: raw_exec's, a plain JVM's."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from herder.context import TaskContext
from herder.errors import DriverError
from herder.model import Task
from herder.objects import ExecResult, ExecSession
from herder.sdk.env import inherited_environment
from herder.sdk.exec_session import ExecProcess
from herder.sdk.process import run_capped
from herder.sdk.users import TaskUser
from herder.supervisor.netns import NamespaceError


class HostCommands:
    """The environment of a task that runs as a plain process of the host, and the commands
    ``herder alloc exec`` runs beside it: in the task directory, as the task's user.

    The environment is herder's own minus secrets (taken once, when this is made, not at
    every start), then the user's ``HOME``, then the task's.
    """

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        self.inherited = inherited_environment(environ)

    def environment(self, task: Task, ctx: TaskContext) -> dict[str, str]:
        """The environment of ``task`` (and of what runs on its behalf)."""
        return self._environment(ctx, TaskUser.lookup(task.user) if task.user else None)

    def exec(self, task: Task, ctx: TaskContext, command: list[str], timeout: float) -> ExecResult:
        """``herder_task_exec``: ``command`` run to its end, its output capped."""
        user = TaskUser.lookup(task.user) if task.user else None
        return run_capped(command, env=self._environment(ctx, user), cwd=ctx.task_dir.dir, timeout=timeout,
                          user=user, netns=_netns(ctx))

    def exec_session(self, task: Task, ctx: TaskContext, command: list[str], tty: bool) -> ExecSession:
        """``herder_task_exec_session``: ``command`` interactive, on a terminal of its own with ``tty``."""
        user = TaskUser.lookup(task.user) if task.user else None
        try:
            return ExecProcess.start(command, env=self._environment(ctx, user), cwd=ctx.task_dir.dir, tty=tty,
                                     user=user, netns=_netns(ctx))
        except NamespaceError as err:
            raise DriverError(str(err)) from None

    def _environment(self, ctx: TaskContext, user: TaskUser | None) -> dict[str, str]:
        return {**self.inherited, **(user.environment() if user else {}), **ctx.env}


def _netns(ctx: TaskContext) -> Path | None:
    """The allocation's network namespace, where the task's commands run too; None for the host's."""
    return ctx.network.path if ctx.network is not None else None
