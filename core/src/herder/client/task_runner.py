"""The task runner: one task of one allocation, from setup to cleanup (SPEC §7)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from herder.client.restarts import Decision, Outcome, RestartTracker
from herder.context import TaskContext
from herder.errors import RecoverableError
from herder.jobspec import interpolate, interpolate_task, validate_config
from herder.model import Task
from herder.objects import ExecResult, ExitResult, TaskEvent, TaskHandle, parse_signal
from herder.plugins.hooks import CLEANUP_ORDER, Hooks
from herder.sdk.durations import format_duration

log = logging.getLogger(__name__)

CLEANUP_ATTEMPTS = 4
CLEANUP_BASE_DELAY = 0.5

Lookup = Callable[[str], "str | None"]


@dataclass
class TaskState:
    """What the outside world sees of a task runner."""

    state: str = "pending"  # pending | running | dead
    failed: bool = False
    restarts: int = 0
    exit_code: int | None = None
    events: list[TaskEvent] = field(default_factory=list)
    handle_state: dict[str, Any] | None = None


class TaskRunner:
    """Runs one task in its own thread: prestart, start, wait, restart, kill, cleanup.

    ``ctx`` is prepared by the allocation runner (directories, ports, log
    sinks, base environment); ``make_lookup`` gives the interpolation lookup
    for an environment. ``on_event`` is called for every event, ``on_dead``
    once when the task is finished for good.
    """

    def __init__(self, task: Task, ctx: TaskContext, hooks: Hooks, tracker: RestartTracker,
                 make_lookup: Callable[[dict[str, str]], Lookup],
                 on_event: Callable[[TaskRunner, TaskEvent], None],
                 on_dead: Callable[[TaskRunner], None]) -> None:
        self.task = task
        self.ctx = ctx
        self.hooks = hooks
        self.tracker = tracker
        self.status = TaskState()
        self._base_env = dict(ctx.env)
        self._make_lookup = make_lookup
        self._on_event = on_event
        self._on_dead = on_dead
        self._lock = threading.RLock()
        self._handle: TaskHandle | None = None
        self._running_task: Task = task
        self._env_task: Task = task
        self._kill_requested = threading.Event()
        self._restart_requested = threading.Event()
        self._wake = threading.Event()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"task-{task.name}", daemon=True)
        ctx.emitter = self._record

    @property
    def name(self) -> str:
        return self.task.name

    # -- events ------------------------------------------------------------

    def _record(self, event: TaskEvent) -> None:
        with self._lock:
            self.status.events.append(event)
        self.hooks.task_event(self._running_task, self.ctx, event)
        self._on_event(self, event)

    def emit(self, type: str, message: str = "", **details: Any) -> None:
        self.ctx.emit_event(type, message, **details)

    # -- control from other threads -----------------------------------------

    def start(self) -> None:
        self._thread.start()

    def fail_setup(self, message: str) -> None:
        """Fail the task without starting it (its allocation could not be set up)."""
        self.emit("Setup Failure", message)
        with self._lock:
            self.status.failed = True
            self.status.state = "dead"
        self._done.set()

    def kill(self, reason: TaskEvent | None = None) -> None:
        """Stop the task for good (gracefully, then by force); returns once it is dead."""
        with self._lock:
            first = not self._kill_requested.is_set()
            self._kill_requested.set()
            self._wake.set()
            handle = self._handle
        if first and reason is not None and not self._done.is_set():
            self._record(reason)
        if first and handle is not None:
            self._kill_handle(handle)
        self._done.wait()

    def restart(self, reason: str = "") -> None:
        """Restart the running task now, without counting against the policy."""
        with self._lock:
            handle = self._handle
        if handle is None or self._kill_requested.is_set():
            return
        self._restart_requested.set()
        self.emit("Restart Signal", reason or "User requested restart")
        self._kill_handle(handle)

    def signal(self, sig: int) -> None:
        with self._lock:
            handle = self._handle
        if handle is not None:
            self.emit("Signaling", f"Task being sent signal {sig}", signal=sig)
            handle.signal(sig)

    def exec(self, command: list[str], timeout: float) -> ExecResult:
        with self._lock:
            handle = self._handle
        if handle is None:
            raise RuntimeError(f"task {self.name} is not running")
        return self.hooks.task_exec(self._running_task, self.ctx, handle, command, timeout)

    # -- the task's thread ---------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # a bug of ours must still leave a dead, cleaned-up task
            log.exception("task runner %s crashed", self.name)
            self.status.failed = True
            self.emit("Driver Failure", f"internal error: {exc}")
        finally:
            self._cleanup()
            with self._lock:
                self.status.state = "dead"
            self._done.set()
            self._on_dead(self)

    def _loop(self) -> None:
        self.emit("Task Setup", "Building Task Directory")
        while not self._kill_requested.is_set():
            decision = self._run_once()
            if decision is None:  # killed
                return
            if decision.outcome is Outcome.RESTART:
                self.emit("Restarting", f"Task restarting in {format_duration(decision.delay)}",
                          restart_delay=decision.delay, reason=decision.reason)
                if self._wake.wait(decision.delay):
                    return
                with self._lock:
                    self.status.restarts += 1
                continue
            if decision.outcome is Outcome.FAIL:
                self.status.failed = True
            self.emit("Not Restarting", decision.reason, reason=decision.reason)
            return

    def _prepare(self) -> Task:
        """A fresh environment (herder's variables, then the task's ``env``
        interpolated against them) and the task interpolated against it."""
        env = interpolate(self.task.env, self._make_lookup(self._base_env))
        self.ctx.env.clear()
        self.ctx.env.update(self._base_env)
        self.ctx.env.update(env)
        self._env_task = dataclasses.replace(self.task, env=env)
        return self._interpolate()

    def _interpolate(self) -> Task:
        """The task interpolated against the environment as it is now: again after
        prestart, whose hooks may change it (a driver that maps ports sets the
        port the task listens on)."""
        task = interpolate_task(self._env_task, self._make_lookup(dict(self.ctx.env)))
        self._running_task = task
        return task

    def _run_once(self) -> Decision | None:
        """Start the task once and wait for it; the restart decision, or None when killed."""
        task = self._prepare()
        errors = validate_config(f"task {task.name}", task.config, self.hooks.task_schema(task.driver))
        if errors:
            self.emit("Failed Validation", "; ".join(errors), errors=errors)
            return self.tracker.after_start_error(recoverable=False)
        try:
            self.hooks.task_prestart(task, self.ctx)
        except Exception as exc:
            self.emit("Setup Failure", self.hooks.describe_failure("herder_task_prestart", exc),
                      recoverable=isinstance(exc, RecoverableError))
            return self.tracker.after_start_error(isinstance(exc, RecoverableError))
        if self._kill_requested.is_set():
            return None
        task = self._interpolate()
        try:
            handle = self.hooks.task_start(task, self.ctx)
        except Exception as exc:
            self.emit("Driver Failure", str(exc) or type(exc).__name__, recoverable=isinstance(exc, RecoverableError))
            return self.tracker.after_start_error(isinstance(exc, RecoverableError))
        with self._lock:
            self._handle = handle
            self.status.state = "running"
            self.status.handle_state = handle.state()
            killed_meanwhile = self._kill_requested.is_set()
        self.emit("Started", "Task started by client")
        if killed_meanwhile:
            self._kill_handle(handle)
        else:
            self.hooks.task_poststart(task, self.ctx, handle)
        result = handle.wait()
        assert result is not None
        return self._after_exit(task, result)

    def _after_exit(self, task: Task, result: ExitResult) -> Decision | None:
        with self._lock:
            self._handle = None
            self.status.exit_code = result.exit_code
        self.emit("Terminated", _describe_exit(result), exit_code=result.exit_code, signal=result.signal,
                  oom_killed=result.oom_killed, error=result.error)
        self.hooks.task_exited(task, self.ctx, result)
        if self._kill_requested.is_set():
            self.emit("Killed", "Task successfully killed")
            return None
        if self._restart_requested.is_set():
            self._restart_requested.clear()
            return Decision(Outcome.RESTART, "Restart requested")
        return self.tracker.after_exit(result)

    def _kill_handle(self, handle: TaskHandle) -> None:
        """prekill hooks, shutdown_delay, then kill_signal and force after kill_timeout."""
        task = self._running_task
        self.hooks.task_prekill(task, self.ctx)
        if task.shutdown_delay > 0:
            self.emit("Waiting for shutdown delay", f"Waiting {format_duration(task.shutdown_delay)}",
                      shutdown_delay=task.shutdown_delay)
            time.sleep(task.shutdown_delay)
        sig = parse_signal(task.kill_signal) if task.kill_signal else None
        sent = task.kill_signal or "the stop signal"
        self.emit("Killing", f"Sent {sent}. Waiting {format_duration(task.kill_timeout)} before force killing",
                  kill_timeout=task.kill_timeout)
        try:
            handle.kill(task.kill_timeout, sig)
        except Exception as exc:
            self.emit("Driver Failure", self.hooks.describe_failure("kill", exc))

    def _cleanup(self) -> None:
        """Cleanup in the documented order; a step raising RecoverableError is retried."""
        for phase in CLEANUP_ORDER:
            for attempt in range(CLEANUP_ATTEMPTS + 1):
                try:
                    self.hooks.task_cleanup(self._running_task, self.ctx, phase)
                    break
                except RecoverableError as exc:
                    if attempt == CLEANUP_ATTEMPTS:
                        self.emit("Task hook failed", self.hooks.describe_failure("herder_task_cleanup", exc))
                        break
                    time.sleep(CLEANUP_BASE_DELAY * 2**attempt)
                except Exception as exc:
                    self.emit("Task hook failed", self.hooks.describe_failure("herder_task_cleanup", exc),
                              hook="herder_task_cleanup", plugin=self.hooks.plugins.blame(exc))
                    break


def _describe_exit(result: ExitResult) -> str:
    parts = [f"Exit Code: {result.exit_code}"]
    if result.signal:
        parts.append(f"Signal: {result.signal}")
    if result.oom_killed:
        parts.append("OOM Killed")
    if result.error:
        parts.append(f"Exit Message: {result.error}")
    return ", ".join(parts)
