"""Driver ``faulty``: raw_exec done right, but for the faults its ``[plugin.faulty]`` table names.

The conformance kit's own tests install this file as module ``herder_faulty``
of a distribution with entry point ``faulty`` (``herder_faulty:make``), and
check that the kit catches each fault. Like any third-party driver, it uses
only :mod:`herder` and :mod:`herder.sdk`.

Faults (``faults = [...]``):

``children_escape``
    The task runs under a launcher that moves it into a session of its own and
    out of its cgroups, as a naive daemonizing launcher does: the kill reaches
    the launcher only, and the task's processes outlive it. (Only root can
    leave a cgroup; without one herder tracks a task's processes by
    parentage, which this launcher does not escape.)
``kill_skips_stop_signal``
    Kill sends SIGKILL at once: neither the kill_signal nor the kill_timeout.
``state_not_json``
    The handle's state holds a datetime.
``exec_ignores_timeout``
    Exec runs the command to its end, whatever the timeout.
``fingerprint_raises``
    A missing shell (``shell``, default ``/bin/sh``) makes the fingerprint raise
    rather than report the driver unavailable.
``no_exec``
    No ``herder_task_exec`` at all, nor ``herder_task_exec_session``.
``session_close_leaves_command``
    Closing an interactive exec session lets its command run on.
``no_stats``
    The handle's ``stats()`` tells nothing (None), as a driver that cannot measure its tasks.
``ignores_network``
    Declares that its tasks join their allocation's network namespace, but starts them in the host's.
``host_network_only``
    Declares host networking only (its tasks would still join a namespace, were they given one).
``capabilities_raise``
    ``herder_driver_capabilities`` raises.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from herder import (
    DriverCapabilities,
    DriverNetwork,
    ExecResult,
    ExecSession,
    ExitResult,
    Fingerprint,
    Task,
    TaskContext,
    TaskHandle,
    TaskStats,
    hookimpl,
)
from herder.sdk import ExecProcess, SupervisedProcess, inherited_environment, run_capped

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["command"],
    "additionalProperties": False,
}

LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.setsid()
    # Into the root cgroup of every hierarchy, out of the one herder tracks the task's processes in:
    # a root process may, and a launcher that daemonizes into the host's cgroup does.
    with open("/proc/self/mountinfo") as mounts:
        for fields in (line.split() for line in mounts):
            if fields[fields.index("-") + 1] in ("cgroup", "cgroup2"):
                try:
                    with open(os.path.join(fields[4], "cgroup.procs"), "w") as procs:
                        procs.write(str(os.getpid()))
                except OSError:
                    pass
    os.execvp(sys.argv[1], sys.argv[1:])
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
"""``python -c LAUNCHER COMMAND ARGS...``: runs the command in a new session, out of its cgroups, and exits
with its status."""

NO_TIMEOUT = 24 * 3600.0


class FaultyHandle:
    """A supervised process, with the handle's faults."""

    def __init__(self, process: SupervisedProcess, faults: set[str]) -> None:
        self.process = process
        self.faults = faults
        self.id = process.id
        self.network: DriverNetwork | None = None

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        return self.process.wait(timeout)

    def signal(self, sig: int) -> None:
        self.process.signal(sig)

    def kill(self, timeout: float, sig: int | None = None) -> None:
        if "kill_skips_stop_signal" in self.faults:
            self.process.kill(0, signal.SIGKILL)
        else:
            self.process.kill(timeout, sig)

    def stats(self) -> TaskStats | None:
        return None if "no_stats" in self.faults else self.process.stats()

    def state(self) -> dict[str, Any]:
        state = self.process.state()
        if "state_not_json" in self.faults:
            state["started"] = datetime.now(UTC)
        return state


class FaultyDriver:
    """Driver ``faulty`` without exec."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.faults = set(config.get("faults", ()))
        self.shell = str(config.get("shell", "/bin/sh"))

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        if not os.access(self.shell, os.X_OK):
            if "fingerprint_raises" in self.faults:
                raise FileNotFoundError(f"no shell at {self.shell}")
            return Fingerprint(detected=False, healthy=False, description=f"no shell at {self.shell}")
        return Fingerprint(detected=True, healthy=True, description="healthy")

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return SCHEMA

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        if "capabilities_raise" in self.faults:
            raise RuntimeError("no capabilities today")
        if "host_network_only" in self.faults:
            return DriverCapabilities(network_isolation=frozenset({"host"}))
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}))

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        argv = [task.config["command"], *task.config.get("args", [])]
        if "children_escape" in self.faults:
            argv = [sys.executable, "-c", LAUNCHER, *argv]
        env = {**inherited_environment(os.environ), **ctx.env}
        netns = ctx.network.path if ctx.network is not None and "ignores_network" not in self.faults else None
        return FaultyHandle(SupervisedProcess.spawn(task, ctx, argv, env=env, cwd=ctx.task_dir.dir, netns=netns),
                            self.faults)

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        process = SupervisedProcess.recover(ctx, state)
        return None if process is None else FaultyHandle(process, self.faults)


class FaultyExecDriver(FaultyDriver):
    """Driver ``faulty`` with exec."""

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        if "exec_ignores_timeout" in self.faults:
            timeout = NO_TIMEOUT
        env = {**inherited_environment(os.environ), **ctx.env}
        return run_capped(command, env=env, cwd=ctx.task_dir.dir, timeout=timeout)

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        env = {**inherited_environment(os.environ), **ctx.env}
        session = ExecProcess.start(command, env=env, cwd=ctx.task_dir.dir, tty=tty)
        return LeavingSession(session) if "session_close_leaves_command" in self.faults else session


class LeavingSession:
    """An exec session whose ``close()`` does nothing: the command runs on."""

    def __init__(self, session: ExecProcess) -> None:
        self.session = session
        self.read, self.write, self.close_stdin = session.read, session.write, session.close_stdin
        self.resize, self.wait = session.resize, session.wait

    def close(self) -> None:
        pass


def make(config: Mapping[str, Any]) -> FaultyDriver:
    """The entry point's factory: a driver without ``herder_task_exec`` for fault ``no_exec``."""
    return FaultyDriver(config) if "no_exec" in config.get("faults", ()) else FaultyExecDriver(config)
