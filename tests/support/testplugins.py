"""Source of the plugins installed by the plugin tests (as module ``herder_testplugins``).

``Recorder`` is a lifecycle plugin and ``RecordingDriver`` a driver; both
append one JSON line per hook call to the file named by their ``log``
configuration, and raise ``RuntimeError`` in the hooks listed in ``raise_in``.
With ``cleanup_later`` (seconds), ``Recorder``'s first cleanup of each task
raises ``CleanupLater`` with that delay; its cleanups then record the
allocation, the process and the time, as the later call may be another
process's.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from herder import (
    Alloc,
    CleanupLater,
    DriverCapabilities,
    ExecResult,
    ExecSession,
    Fingerprint,
    NetworkIsolation,
    RecoverableError,
    Task,
    TaskContext,
    TaskHandle,
    hookimpl,
)
from herder.sdk import ExecProcess, SupervisedProcess


class _Recording:
    kind = ""

    def __init__(self, config: dict[str, Any]) -> None:
        self.log = Path(config["log"])
        self.raise_in = set(config.get("raise_in", []))
        self.recoverable_once = set(config.get("recoverable_once", []))

    def record(self, hook: str, task: Task | None = None, **extra: Any) -> None:
        line = {"hook": hook, "kind": self.kind, "task": task.name if task else None, **extra}
        with self.log.open("a") as f:
            f.write(json.dumps(line) + "\n")
        if hook in self.recoverable_once:
            self.recoverable_once.discard(hook)
            raise RecoverableError(f"{self.kind} asks to retry {hook}")
        if hook in self.raise_in:
            raise RuntimeError(f"{self.kind} broke in {hook}")


class Recorder(_Recording):
    kind = "lifecycle"

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__(config)
        self.cleanup_later: float | None = config.get("cleanup_later")

    @hookimpl
    def herder_alloc_prerun(self, alloc: Any) -> None:
        self.record("herder_alloc_prerun", alloc=alloc.name)

    @hookimpl
    def herder_alloc_postrun(self, alloc: Any) -> None:
        self.record("herder_alloc_postrun", alloc=alloc.name)

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        ctx.env["RECORDER_SEEN"] = "yes"
        self.record("herder_task_prestart", task)

    @hookimpl
    def herder_task_poststart(self, task: Task, ctx: TaskContext, handle: TaskHandle) -> None:
        self.record("herder_task_poststart", task)

    @hookimpl
    def herder_task_exited(self, task: Task, ctx: TaskContext, result: Any) -> None:
        self.record("herder_task_exited", task, exit_code=result.exit_code)

    @hookimpl
    def herder_task_prekill(self, task: Task, ctx: TaskContext) -> None:
        self.record("herder_task_prekill", task)

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        if self.cleanup_later is None:
            self.record("herder_task_cleanup", task)
            return
        first = not any(line.get("hook") == "herder_task_cleanup" and line.get("alloc") == ctx.alloc_id
                        and line.get("task") == task.name for line in self.lines())
        self.record("herder_task_cleanup", task, alloc=ctx.alloc_id, pid=os.getpid(), time=time.time())
        if first:
            raise CleanupLater(self.cleanup_later, "the recorder finishes later")

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    @hookimpl
    def herder_task_event(self, task: Task, ctx: TaskContext, event: Any) -> None:
        self.record("herder_task_event", task, type=event.type)


class RecordingDriver(_Recording):
    """Runs ``config.command`` with ``config.args`` as a plain process."""

    kind = "driver"

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        self.record("herder_driver_fingerprint")
        return Fingerprint(detected=True, healthy=True, description="recording",
                           attributes={"driver.recdriver.version": "1.0"})

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        self.record("herder_driver_task_schema")
        return {"type": "object", "required": ["command"],
                "properties": {"command": {"type": "string"}, "args": {"type": "array"}}}

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        self.record("herder_driver_capabilities")
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}), volume_mounts=True)

    @hookimpl
    def herder_alloc_network_create(self, alloc: Alloc, hostname: str) -> NetworkIsolation | None:
        """Leaves the namespace to herder, as every driver but docker does."""
        self.record("herder_alloc_network_create", alloc=alloc.id, hostname=hostname)
        return None

    @hookimpl
    def herder_alloc_network_destroy(self, alloc: Alloc, isolation: NetworkIsolation) -> None:
        self.record("herder_alloc_network_destroy", alloc=alloc.id)

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        self.record("herder_task_prestart", task, env_seen=ctx.env.get("RECORDER_SEEN"))

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        self.record("herder_task_start", task)
        argv = [task.config["command"], *task.config.get("args", [])]
        return SupervisedProcess.spawn(task, ctx, argv, env=ctx.env, cwd=ctx.task_dir.dir,
                                       default_signal=signal.SIGTERM)

    @hookimpl
    def herder_task_poststart(self, task: Task, ctx: TaskContext, handle: TaskHandle) -> None:
        self.record("herder_task_poststart", task)

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        self.record("herder_task_exec", task, command=command)
        return ExecResult(exit_code=0, output=b"recorded")

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        self.record("herder_task_exec_session", task, command=command, tty=tty)
        return ExecProcess.start(["printf", "recorded"], env=None, cwd=None, tty=tty)

    @hookimpl
    def herder_task_exited(self, task: Task, ctx: TaskContext, result: Any) -> None:
        self.record("herder_task_exited", task)

    @hookimpl
    def herder_task_prekill(self, task: Task, ctx: TaskContext) -> None:
        self.record("herder_task_prekill", task)

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        self.record("herder_task_recover", task)
        return None

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        self.record("herder_task_cleanup", task)

    @hookimpl
    def herder_task_event(self, task: Task, ctx: TaskContext, event: Any) -> None:
        self.record("herder_task_event", task, type=event.type)
