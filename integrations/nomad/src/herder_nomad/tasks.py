"""One Nomad task run through herder: its ``Task``, its ``ctx``, its handle, its hooks.

Nomad owns placement: the task directory, the environment and the ports come
in the ``TaskConfig`` of ``StartTask``, and output goes to the log FIFOs
Nomad's log collector reads (so ``nomad alloc logs`` works). herder's lifecycle
plugins and the task's herder driver take part as in ``herder run``:
prestart (lifecycle plugins, then the driver), start, poststart, exited,
prekill, cleanup (the driver, then lifecycle plugins).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from herder import ExitResult, RecoverableError, Task, TaskEvent, TaskHandle
from herder.context import AllocatedPort, CreatedResources, TaskContext, TaskDir
from herder.model import Resources
from herder.plugins.hooks import Hooks
from herder_nomad.wire import driver_pb2

log = logging.getLogger(__name__)

CLEANUP_ATTEMPTS = 4
"""A cleanup step that raises RecoverableError is tried again, up to this many times in all."""

DRIVER_STATE_VERSION = 1


@dataclass
class NomadTask:
    """What ``StartTask`` (or, after a restart, ``RecoverTask``) tells about a task."""

    id: str
    task: Task
    ctx: TaskContext
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    handle: TaskHandle | None = None
    result: ExitResult | None = None
    completed_at: datetime | None = None
    exited: threading.Event = field(default_factory=threading.Event)
    stage: str = ""
    """The hook being called while starting: what a start failure is reported against."""

    @property
    def running(self) -> bool:
        return self.handle is not None and not self.exited.is_set()

    def driver_state(self) -> dict[str, Any]:
        """What Nomad stores with the task handle, for ``RecoverTask``."""
        assert self.handle is not None
        return {"version": DRIVER_STATE_VERSION, "driver": self.task.driver, "config": self.task.config,
                "state": self.handle.state(), "created": self.ctx.created.items(),
                "started_at": self.started_at.isoformat()}


class EventHub:
    """Task events on their way to every ``TaskEvents`` stream Nomad opened."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[queue.Queue[driver_pb2.DriverTaskEvent | None]] = []

    def subscribe(self) -> queue.Queue[driver_pb2.DriverTaskEvent | None]:
        q: queue.Queue[driver_pb2.DriverTaskEvent | None] = queue.Queue()
        with self._lock:
            self._queues.append(q)
        return q

    def unsubscribe(self, q: queue.Queue[driver_pb2.DriverTaskEvent | None]) -> None:
        with self._lock:
            if q in self._queues:
                self._queues.remove(q)

    def publish(self, event: driver_pb2.DriverTaskEvent) -> None:
        with self._lock:
            for q in self._queues:
                q.put(event)

    def close(self) -> None:
        with self._lock:
            for q in self._queues:
                q.put(None)


def task_paths(config: driver_pb2.TaskConfig) -> TaskDir:
    """Nomad's directories of this task: ``<alloc_dir>/<task>/{local,secrets,tmp}`` and the shared
    ``<alloc_dir>/alloc`` with its ``logs``."""
    alloc = Path(config.alloc_dir)
    task_dir = alloc / config.name
    return TaskDir(dir=task_dir, local_dir=task_dir / "local", secrets_dir=task_dir / "secrets",
                   tmp_dir=task_dir / "tmp", alloc_dir=alloc / "alloc", logs_dir=alloc / "alloc" / "logs")


def task_ports(config: driver_pb2.TaskConfig) -> list[AllocatedPort]:
    """The ports Nomad allocated: the group network's port mappings, else the task network's ports."""
    resources = config.resources
    ports = [AllocatedPort(label=p.label, value=p.value, to=p.to or None, host_ip=p.host_ip or "127.0.0.1")
             for p in resources.ports]
    if ports:
        return ports
    for network in resources.allocated_resources.networks:
        for port in [*network.reserved_ports, *network.dynamic_ports]:
            ports.append(AllocatedPort(label=port.label, value=port.value, host_ip=network.ip or "127.0.0.1"))
    return ports


def task_environment(config: driver_pb2.TaskConfig) -> dict[str, str]:
    """Nomad's environment for the task, with each ``NOMAD_<NAME>`` also as ``HERDER_<NAME>``."""
    env = dict(config.env)
    for name, value in list(env.items()):
        if name.startswith("NOMAD_") and f"HERDER_{name[6:]}" not in env:
            env[f"HERDER_{name[6:]}"] = value
    return env


def build_task(config: driver_pb2.TaskConfig, driver: str, driver_config: dict[str, Any]) -> Task:
    allocated = config.resources.allocated_resources
    return Task(
        name=config.name, driver=driver, config=driver_config, env=dict(config.env), user=config.user,
        resources=Resources(cpu=int(allocated.cpu.cpu_shares) or 100, memory=int(allocated.memory.memory_mb) or 300,
                            memory_max=int(allocated.memory.memory_max_mb)),
    )


def open_output(path: str) -> BinaryIO:
    """One of Nomad's log FIFOs (or a plain file), for writing; fails at once when nobody reads a FIFO."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb", buffering=0)


def build_context(config: driver_pb2.TaskConfig, supervisor: object,
                  emit: Callable[[TaskEvent], None], created: CreatedResources | None = None) -> TaskContext:
    env = task_environment(config)
    stdout, stderr = open_output(config.stdout_path), open_output(config.stderr_path)
    try:
        index = int(env.get("NOMAD_ALLOC_INDEX", "0"))
    except ValueError:
        index = 0
    return TaskContext(
        alloc_id=config.alloc_id, alloc_name=env.get("NOMAD_ALLOC_NAME", ""), alloc_index=index,
        job_name=config.job_name, group_name=config.task_group_name, task_name=config.name, env=env,
        task_dir=task_paths(config), ports=task_ports(config), stdout=stdout, stderr=stderr,
        created=created or CreatedResources(), logger=logging.getLogger(f"herder.task.{config.name}"),
        emitter=emit, supervisor=supervisor, output_paths=(Path(config.stdout_path), Path(config.stderr_path)),
    )


def start(hooks: Hooks, running: NomadTask) -> None:
    """Prestart (lifecycle plugins, then the driver), start, poststart. Raises what a plugin raised."""
    task, ctx = running.task, running.ctx
    running.stage = "herder_task_prestart"
    hooks.task_prestart(task, ctx, "lifecycle")
    hooks.task_prestart(task, ctx, "driver")
    running.stage = "herder_task_start"
    running.handle = hooks.task_start(task, ctx)
    running.stage = "herder_task_poststart"
    hooks.task_poststart(task, ctx, running.handle)


def watch(hooks: Hooks, running: NomadTask) -> None:
    """Wait for the task's exit in the background, then tell the ``herder_task_exited`` hooks."""
    def run() -> None:
        assert running.handle is not None
        try:
            result = running.handle.wait()
        except Exception as exc:  # a broken handle is a failed task, not a stuck WaitTask
            result = ExitResult(exit_code=-1, error=f"waiting for the task failed: {exc}")
        result = result or ExitResult(exit_code=-1, error="the driver returned no exit result")
        running.result, running.completed_at = result, datetime.now(UTC)
        hooks.task_exited(running.task, running.ctx, result)
        running.exited.set()

    threading.Thread(target=run, name=f"wait-{running.id}", daemon=True).start()


def stop(hooks: Hooks, running: NomadTask, timeout: float, sig: int) -> None:
    """``herder_task_prekill``, then the handle's kill: ``sig``, ``timeout`` s, then force."""
    if running.handle is None or running.exited.is_set():
        return
    hooks.task_prekill(running.task, running.ctx)
    running.handle.kill(timeout, sig)
    running.exited.wait(timeout + 30)


def cleanup(hooks: Hooks, running: NomadTask) -> None:
    """The driver's cleanup, then the lifecycle plugins'; a step that raises RecoverableError is
    tried again with growing delays; whatever else fails is logged, never raised."""
    for phase in ("driver", "lifecycle"):
        for attempt in range(CLEANUP_ATTEMPTS):
            try:
                hooks.task_cleanup(running.task, running.ctx, phase)  # type: ignore[arg-type]
                break
            except RecoverableError as exc:
                if attempt + 1 == CLEANUP_ATTEMPTS:
                    log.warning("cleanup of %s (%s) gave up: %s", running.id, phase, exc)
                else:
                    time.sleep(0.5 * 2 ** attempt)
            except Exception as exc:
                log.warning("%s", hooks.describe_failure("herder_task_cleanup", exc))
                break
    for file in (running.ctx.stdout, running.ctx.stderr):
        with contextlib.suppress(OSError):
            file.close()
