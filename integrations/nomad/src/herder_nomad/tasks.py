"""One Nomad task run through herder: its ``Task``, its ``ctx``, its handle, its lifecycle.

Nomad owns placement: the task directory, the environment and the ports come
in the ``TaskConfig`` of ``StartTask``, and output goes to the log FIFOs
Nomad's log collector reads (so ``nomad alloc logs`` works). herder's lifecycle
plugins and the task's herder driver take part through herder's own lifecycle
script (:class:`herder.app.nomad.TaskScript`), as in ``herder run``: validate,
prestart, start, poststart, exited, prekill and kill, cleanup with its retries.
Nomad's calls are synchronous, each advancing the script to its next wait:
``StartTask`` (or ``RecoverTask``) to the running task, ``WaitTask`` past its exit,
``StopTask`` through the kill path, ``DestroyTask`` through cleanup (the
allocation's hooks around the tasks: :mod:`herder_nomad.allocs`). A cleanup
step that asks to finish later (:class:`herder.CleanupLater`) is kept in the
plugin's state database and called again when due, by this plugin process or
the next one (:func:`cleanup`).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from google.protobuf.message import DecodeError

from herder import (
    AllocatedPort,
    CreatedResources,
    ExitResult,
    HostMount,
    Task,
    TaskContext,
    TaskDir,
    TaskEvent,
    TaskHandle,
)
from herder.app.nomad import (
    AwaitExit,
    DeferredCleanups,
    Failed,
    Ran,
    Resources,
    Stepper,
    Stop,
    TaskLifecycle,
    TaskScript,
    Woke,
    run_through,
)
from herder_nomad.wire import driver_pb2

log = logging.getLogger(__name__)

DRIVER_STATE_VERSION = 1


@dataclass
class NomadTask:
    """What ``StartTask`` (or, after a restart, ``RecoverTask``) tells about a task, and its script.

    Nomad's calls come on threads of their own and may overlap (``StopTask`` while ``WaitTask``
    waits): each advances the script under ``lock``, and none holds it while it waits for the exit.
    """

    id: str
    lifecycle: TaskLifecycle
    config: driver_pb2.TaskConfig
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    steps: Stepper | None = None
    result: ExitResult | None = None
    completed_at: datetime | None = None
    exited: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _due: threading.Event = field(default_factory=threading.Event)
    _armed: AwaitExit | None = None

    def __post_init__(self) -> None:
        # Nomad stops a task only by StopTask: nothing else tells the script to stop.
        self.script = TaskScript(self.lifecycle, threading.Event(), config_path(self.config))

    @property
    def task(self) -> Task:
        return self.lifecycle.task

    @property
    def ctx(self) -> TaskContext:
        return self.lifecycle.ctx

    @property
    def handle(self) -> TaskHandle | None:
        return self.steps.handle if self.steps is not None else None

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
    """Task events on their way to every ``TaskEvents`` stream Nomad opened.

    Events of a task that Nomad is recovering are held (:meth:`hold`): Nomad takes a
    task's events only once it has its handle back, and drops those that come before
    (``no handler registered for event``). They go out when Nomad next opens a stream,
    or asks for the task's exit (``WaitTask``), whichever comes first (:meth:`release`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[queue.Queue[driver_pb2.DriverTaskEvent | None]] = []
        self._held: dict[str, list[driver_pb2.DriverTaskEvent]] = {}

    def subscribe(self) -> queue.Queue[driver_pb2.DriverTaskEvent | None]:
        q: queue.Queue[driver_pb2.DriverTaskEvent | None] = queue.Queue()
        with self._lock:
            self._queues.append(q)
            held, self._held = self._held, {}
        for events in held.values():
            for event in events:
                self.publish(event)
        return q

    def unsubscribe(self, q: queue.Queue[driver_pb2.DriverTaskEvent | None]) -> None:
        with self._lock:
            if q in self._queues:
                self._queues.remove(q)

    def hold(self, task_id: str) -> None:
        """Keep the events of ``task_id`` from now on, until :meth:`release`."""
        with self._lock:
            self._held.setdefault(task_id, [])

    def release(self, task_id: str) -> None:
        """Send what was held of ``task_id``'s events, and its events from now on as they come."""
        with self._lock:
            held = self._held.pop(task_id, [])
        for event in held:
            self.publish(event)

    def publish(self, event: driver_pb2.DriverTaskEvent) -> None:
        with self._lock:
            held = self._held.get(event.task_id)
            if held is not None:
                held.append(event)
                return
            for q in self._queues:
                q.put(event)

    def close(self) -> None:
        with self._lock:
            for q in self._queues:
                q.put(None)


def config_path(config: driver_pb2.TaskConfig) -> str:
    """Where a task's herder config is in its job, for errors that name it."""
    return f"job.group[{config.task_group_name}].task[{config.name}].config"


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


def alloc_index(config: driver_pb2.TaskConfig) -> int:
    """The index of the task's allocation in its group, from Nomad's environment (0 when unreadable)."""
    try:
        return int(config.env.get("NOMAD_ALLOC_INDEX", "0"))
    except ValueError:
        return 0


def open_output(path: str) -> BinaryIO:
    """One of Nomad's log FIFOs (or a plain file), for writing; fails at once when nobody reads a FIFO."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "wb", buffering=0)


def build_context(config: driver_pb2.TaskConfig, supervisor: object, emit: Callable[[TaskEvent], None],
                  created: CreatedResources | None = None,
                  outputs: tuple[BinaryIO, BinaryIO] | None = None) -> TaskContext:
    """The task's context; its output goes to ``outputs``, else to Nomad's log FIFOs."""
    env = task_environment(config)
    stdout, stderr = outputs or (open_output(config.stdout_path), open_output(config.stderr_path))
    return TaskContext(
        alloc_id=config.alloc_id, alloc_name=env.get("NOMAD_ALLOC_NAME", ""), alloc_index=alloc_index(config),
        job_name=config.job_name, group_name=config.task_group_name, task_name=config.name, env=env,
        task_dir=task_paths(config), ports=task_ports(config), stdout=stdout, stderr=stderr,
        created=created or CreatedResources(), logger=logging.getLogger(f"herder.task.{config.name}"),
        emitter=emit, supervisor=supervisor,
        output_paths=None if outputs else (Path(config.stdout_path), Path(config.stderr_path)),
        # Nomad's client resolved the task's volume_mounts against its own host volumes.
        mounts=[HostMount(Path(mount.host_path), mount.task_path, mount.readonly) for mount in config.mounts],
    )


def start(running: NomadTask) -> Failed | None:
    """The script up to the running task (prepare and validate, prestart, start, poststart); how it
    failed to start, if it did (``running.script.lifecycle.step`` says where)."""
    steps = running.steps = Stepper(running.script.life())
    with running.lock:
        steps.send(None)
        while not isinstance(steps.at, AwaitExit | Ran):
            steps.send(None)  # prestart is done: the task starts
    return None if isinstance(steps.at, AwaitExit) else _failed(steps)


def recover(running: NomadTask, state: dict[str, Any]) -> bool:
    """The script from the task a handle's ``state`` describes (recovered, then poststart); False when
    it cannot be found (a ``Driver Failure`` event says why when the driver raised)."""
    steps = running.steps = Stepper(running.script.life(recover=state))
    with running.lock:
        steps.send(None)
    return isinstance(steps.at, AwaitExit)


def _failed(steps: Stepper) -> Failed:
    outcome = steps.outcome
    assert isinstance(outcome, Failed), "a script that did not start the task stops at the run's end"
    return outcome


def exited_within(running: NomadTask, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the task's exit, and take the script past it (the
    ``herder_task_exited`` hooks): whether it has exited. The exit is waited for through the
    handle's ``on_exit`` (else a thread of its own), not with the lock held; never once the
    plugin stops."""
    steps = running.steps
    assert steps is not None
    with running.lock:
        at = steps.at
        if not isinstance(at, AwaitExit):
            return running.exited.is_set()
        if running._armed is not at:
            running._armed = at
            running._due.clear()
            at.watch.arm(running._due.set)
    stopping = running.lifecycle.interrupt
    if not running._due.wait(timeout) or stopping.is_set():
        # The plugin stops (its supervisor connection closing wakes the watch): the task runs on,
        # for the next plugin process to recover; asked now, its handle would count it lost.
        return False
    with running.lock:
        if steps.at is at:
            steps.send(Woke.EXITED)  # an early notice leaves the script at a new wait: armed next time
        if steps.exit is not None and not running.exited.is_set():
            running.result, running.completed_at = steps.exit.result, datetime.now(UTC)
            running.exited.set()
    return running.exited.is_set()


def stop(running: NomadTask, timeout: float, sig: int) -> None:
    """The script's kill with Nomad's ``sig`` and ``timeout``, then wait for the exit.

    :raises Exception: what the handle's kill raised when it failed for good.
    """
    steps = running.steps
    if steps is None or steps.handle is None or running.exited.is_set():
        return
    with running.lock:
        at = steps.at
        if isinstance(at, AwaitExit) and at.killable:
            steps.send(Stop(timeout, sig))
            failure = steps.kill_failure
        else:  # killed already: again, with this signal and timeout (a forced destroy)
            failure = run_through(running.script.kill(steps.handle, timeout=timeout, sig=sig))
    if failure is not None:
        raise failure
    give_up = time.monotonic() + timeout + 30
    while not exited_within(running, 1.0) and time.monotonic() < give_up:
        if running.lifecycle.interrupt.is_set():
            return  # the plugin stops: the task's exit is the next plugin process's


def cleanup(running: NomadTask, later: DeferredCleanups) -> None:
    """The lifecycle's cleanup: a step that failed for good is logged, one that asked to finish
    later goes to ``later`` (with what :func:`rebuild` needs). Then the log FIFOs are closed."""
    steps = running.steps
    with running.lock:
        if steps is not None and not steps.over and isinstance(steps.at, Ran):
            steps.send(None)  # Nomad runs a task once: the script ends with its cleanup
            report = steps.report
        else:  # the task did not exit (its kill failed), or its script never began
            report = None
        if report is None:
            report = running.script.cleanup()
    for _, exc in report.failed:
        log.warning("task %s: %s", running.id,
                    running.lifecycle.hooks.describe_failure("herder_task_cleanup", exc))
    for who, step in report.later:
        later.add(running.ctx.alloc_id, running.task.name, who, step.delay, key=running.id,
                  extra=stored_task(running))
    for file in (running.ctx.stdout, running.ctx.stderr):
        with contextlib.suppress(OSError):
            file.close()


def stored_task(running: NomadTask) -> dict[str, Any]:
    """What a cleanup step left for later keeps of its task in the plugin's state database.

    Nomad forgets a task once it destroyed it: no later plugin process hears of
    it again. So the step keeps the task's ``TaskConfig`` as Nomad gave it, its
    herder driver and config, and what the plugins noted in ``created``.
    """
    return {"task_config": base64.b64encode(running.config.SerializeToString()).decode(),
            "driver": running.task.driver, "config": running.task.config, "created": running.ctx.created.items()}


def rebuild(stored: Mapping[str, Any], supervisor: object) -> tuple[Task, TaskContext] | None:
    """The task and a context for it, from :func:`stored_task`, for a cleanup step's later call (None
    when unreadable). Nomad's log FIFOs are gone with the task: its output goes to the plugin's
    log (stderr), and its events are logged, as Nomad would ignore them."""
    try:
        config = driver_pb2.TaskConfig.FromString(base64.b64decode(stored["task_config"]))
        task = build_task(config, str(stored["driver"]), dict(stored["config"]))
        created = CreatedResources([tuple(item) for item in stored["created"]])
    except (KeyError, TypeError, ValueError, DecodeError) as exc:
        log.warning("a cleanup step left for later has an unreadable task (%s): it is dropped", exc)
        return None

    def emit(event: TaskEvent) -> None:
        log.info("task %s: %s: %s", config.id, event.type, event.message)

    return task, build_context(config, supervisor, emit, created, outputs=(sys.stderr.buffer, sys.stderr.buffer))
