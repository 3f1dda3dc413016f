"""The task runner: one task of one allocation, from setup to cleanup.

The runner is a loop in a thread of its own: prepare, prestart, start, wait,
decide by the restart policy, and again; on the final stop, prekill, kill and
cleanup. Every concern that is not the loop itself (the environment, images,
services) is a hook. Every change of state is persisted as it happens, so a
herder started again on the same data dir picks the task up where it was:
:meth:`TaskRunner.start` with a stored handle state reattaches to the running
task instead of starting it again.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from herder import events
from herder.client.placement import PlacedTask
from herder.client.restarts import Decision, Outcome, RestartTracker
from herder.errors import CleanupLater, DriverError, RecoverableError
from herder.jobspec import interpolate, interpolate_task, validate_config
from herder.model import Task
from herder.objects import ExecResult, ExitResult, TaskEvent, TaskHandle, parse_signal
from herder.plugins.hooks import CLEANUP_ORDER, PRESTART_ORDER, Hooks, Phase
from herder.sdk.durations import format_duration

log = logging.getLogger(__name__)

CLEANUP_ATTEMPTS = 4
CLEANUP_BASE_DELAY = 0.5

LOST = ExitResult(exit_code=-1, error="the task could not be reattached")
"""How a task that was running when herder stopped, and cannot be found again, ended."""


@dataclass
class TaskState:
    """What the outside world sees of a task runner."""

    state: str = "pending"  # pending | running | dead
    failed: bool = False
    restarts: int = 0
    exit_code: int | None = None
    events: list[TaskEvent] = field(default_factory=list)
    handle_state: dict[str, Any] | None = None


Persist = Callable[..., None]
"""Stores changed fields of the task's record (``state``, ``restarts``, ``handle_state``, ...)."""

DeferCleanup = Callable[[Phase, float], None]
"""Has a cleanup step that raised :class:`herder.CleanupLater` called again after a delay."""


class TaskRunner:
    """Runs one task in its own thread: prestart, start, wait, restart, kill, cleanup.

    ``placed`` is the task as placement prepared it (context, log sinks,
    environment). ``on_event`` is called for every event, ``on_dead`` once
    when the task is finished for good, ``persist`` with every change of
    state, ``defer_cleanup`` for a cleanup step to finish later. ``recover``
    is the handle state stored by an earlier herder: the runner reattaches
    to that task rather than starting it. ``max_kill_timeout`` caps the
    task's ``kill_timeout`` and ``shutdown_delay`` (``[client] max_kill_timeout``).
    """

    def __init__(self, placed: PlacedTask, hooks: Hooks, tracker: RestartTracker, *,
                 on_event: Callable[[TaskRunner, TaskEvent], None], on_dead: Callable[[TaskRunner], None],
                 persist: Persist, defer_cleanup: DeferCleanup, status: TaskState | None = None,
                 recover: dict[str, Any] | None = None, max_kill_timeout: float | None = None) -> None:
        self.task, self._capped = cap_kill_times(placed.task, max_kill_timeout)
        self.ctx = placed.ctx
        self.hooks = hooks
        self.tracker = tracker
        self.status = status or TaskState()
        self._base_env = dict(self.ctx.env)
        self._make_lookup = placed.make_lookup
        self._on_event = on_event
        self._on_dead = on_dead
        self._persist = persist
        self._defer_cleanup = defer_cleanup
        self._recover = recover
        self._lock = threading.RLock()
        self._handle: TaskHandle | None = None
        self._running_task: Task = self.task
        self._env_task: Task = self.task
        self._kill_requested = threading.Event()
        self._hurry = threading.Event()  # a second kill: the shutdown delay is not waited out
        self._restart_requested = threading.Event()
        self._restart_failure = False
        self._wake = threading.Event()
        self._done = threading.Event()
        self._started = False
        if self.status.state == "dead":  # restored from state: finished for good already
            self._done.set()
        self._thread = threading.Thread(target=self._run, name=f"task-{self.task.name}", daemon=True)
        self.ctx.emitter = self._record

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def stopping(self) -> bool:
        """The task is being stopped for good: a prestart hook that waits can give up."""
        return self._kill_requested.is_set()

    # -- events and state -----------------------------------------------------

    def _record(self, event: TaskEvent) -> None:
        with self._lock:
            self.status.events.append(event)
        self.hooks.task_event(self._running_task, self.ctx, event)
        self._on_event(self, event)

    def emit(self, type: str, message: str = "", **details: Any) -> None:
        self.ctx.emit_event(type, message, **details)

    def _set(self, **fields: Any) -> None:
        """Change the task's state, here and in the store."""
        with self._lock:
            for name, value in fields.items():
                setattr(self.status, name, value)
        self._persist(**fields)

    # -- control from other threads -----------------------------------------

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Start the task's thread; it is started once, later calls do nothing."""
        with self._lock:
            if self._started:
                return
            self._started = True
        self._thread.start()

    def fail_setup(self, message: str) -> None:
        """Fail the task without starting it (its allocation could not be set up); returns once it is dead.

        A task an earlier herder left running is reattached only to be killed
        and cleaned up, as any task being stopped: it must not run on beside
        the allocation that may replace its own."""
        if self._recover is not None:
            self._set(failed=True)
            self.kill(TaskEvent(events.SETUP_FAILURE, message))
            return
        self.emit(events.SETUP_FAILURE, message)
        self._set(failed=True, state="dead", finished_at=time.time())
        self._done.set()

    def kill(self, reason: TaskEvent | None = None) -> None:
        """Stop the task for good (gracefully, then by force); returns once it is dead.

        A kill while another is under way ends its ``shutdown_delay`` at once."""
        with self._lock:
            first = not self._kill_requested.is_set()
            if not first:
                self._hurry.set()
            self._kill_requested.set()
            self._wake.set()
            handle = self._handle
        if first and reason is not None and not self._done.is_set():
            self._record(reason)
        if first and handle is not None:
            self._kill_handle(handle)
        if not self._done.is_set():
            self.start()  # a task killed before it started: its thread only cleans up
        self._done.wait()

    def restart(self, reason: str = "", *, failure: bool = False) -> None:
        """Restart the running task now. A restart on request does not count against
        the restart policy; a ``failure`` (the task failed its health checks) does."""
        with self._lock:
            handle = self._handle
        if handle is None or self._kill_requested.is_set():
            return
        self._restart_failure = failure
        self._restart_requested.set()
        self.emit(events.RESTART_SIGNAL, reason or "User requested restart")
        self._kill_handle(handle)

    def signal(self, sig: int) -> None:
        with self._lock:
            handle = self._handle
        if handle is not None:
            self.emit(events.SIGNALING, f"Task being sent signal {sig}", signal=sig)
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
            self._set(failed=True)
            self.emit(events.DRIVER_FAILURE, f"internal error: {exc}")
        finally:
            self._cleanup()
            self._set(state="dead", handle_state=None, finished_at=time.time())
            self._done.set()
            self._on_dead(self)

    def _loop(self) -> None:
        if self._recover is not None:
            decision = self._reattach(self._recover)
        elif self._kill_requested.is_set():  # killed while it waited for its turn to start
            return
        else:
            self.emit(events.TASK_SETUP, "Building Task Directory")
            decision = self._run_once()
        while decision is not None:
            if decision.outcome is Outcome.RESTART:
                self.emit(events.RESTARTING, f"Task restarting in {format_duration(decision.delay)}",
                          restart_delay=decision.delay, reason=decision.reason)
                if self._wake.wait(decision.delay):
                    return
                self._set(restarts=self.status.restarts + 1)
                decision = self._run_once()
                continue
            if decision.outcome is Outcome.FAIL:
                self._set(failed=True)
            self.emit(events.NOT_RESTARTING, decision.reason, reason=decision.reason)
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
        if self._kill_requested.is_set():
            return None
        task = self._prepare()
        try:
            schema = self.hooks.task_schema(task.driver)
        except DriverError as exc:
            self.emit(events.DRIVER_FAILURE, str(exc))
            return self._after_start_error(recoverable=False)
        errors = validate_config(f"task {task.name}", task.config, schema)
        if errors:
            self.emit(events.FAILED_VALIDATION, "; ".join(errors), errors=errors)
            return self._after_start_error(recoverable=False)
        for phase in PRESTART_ORDER:
            try:
                self.hooks.task_prestart(task, self.ctx, phase)
            except Exception as exc:
                recoverable = isinstance(exc, RecoverableError)
                # The driver's own preparation failing (an image pull, a refused volume) is the
                # driver failing; a lifecycle plugin failing is the task's setup failing.
                kind = events.DRIVER_FAILURE if phase == "driver" else events.SETUP_FAILURE
                self.emit(kind, self.hooks.describe_failure("herder_task_prestart", exc), recoverable=recoverable)
                return self._after_start_error(recoverable)
        if self._kill_requested.is_set():
            return None
        task = self._interpolate()
        try:
            handle = self.hooks.task_start(task, self.ctx)
        except Exception as exc:
            recoverable = isinstance(exc, RecoverableError)
            self.emit(events.DRIVER_FAILURE, str(exc) or type(exc).__name__, recoverable=recoverable)
            return self._after_start_error(recoverable)
        if not self._adopt(handle):
            return self._after_exit(task, self._kill_lost(handle), recoverable=False)
        self.emit(events.STARTED, "Task started by client", **started_details(handle))
        return self._watch(task, handle)

    def _reattach(self, state: dict[str, Any]) -> Decision | None:
        """Find the task an earlier herder started; one that cannot be found is
        handled by the restart policy, as if it had failed."""
        task = self._prepare()
        try:
            handle = self.hooks.task_recover(task, self.ctx, state)
        except Exception as exc:
            self.emit(events.DRIVER_FAILURE, self.hooks.describe_failure("herder_task_recover", exc))
            handle = None
        if handle is None:
            return self._after_exit(task, LOST)
        if not self._adopt(handle):
            return self._after_exit(task, self._kill_lost(handle), recoverable=False)
        if not self._kill_requested.is_set():  # else found only to be killed
            self.emit(events.REATTACHED, "Task found running after herder restarted", handle=handle.id)
        return self._watch(task, handle)

    def _adopt(self, handle: TaskHandle) -> bool:
        """Make ``handle`` the running task and persist its state; False if its
        state cannot be had (the task cannot be recovered, so it is killed)."""
        try:
            handle_state = handle.state()
        except Exception as exc:
            self.emit(events.DRIVER_FAILURE, self.hooks.describe_failure("state", exc))
            return False
        with self._lock:
            self._handle = handle
        self._set(state="running", handle_state=handle_state, created=self.ctx.created.items(),
                  started_at=time.time())
        return True

    def _watch(self, task: Task, handle: TaskHandle) -> Decision | None:
        """Poststart, then wait for the task to exit."""
        if self._kill_requested.is_set():
            self._kill_handle(handle)
        else:
            self.hooks.task_poststart(task, self.ctx, handle)
        try:
            result = handle.wait()
        except Exception as exc:
            self.emit(events.DRIVER_FAILURE, self.hooks.describe_failure("wait", exc))
            return self._after_exit(task, self._kill_lost(handle), recoverable=False)
        assert result is not None
        return self._after_exit(task, result)

    def _kill_lost(self, handle: TaskHandle) -> ExitResult:
        """A task whose handle failed is killed, so that it never runs unwatched."""
        try:
            handle.kill(0, None)
        except Exception as exc:
            log.warning("task %s: cannot kill a task whose handle failed: %s", self.name, exc)
        return ExitResult(exit_code=-1, error="the driver lost track of the task")

    def _after_start_error(self, recoverable: bool) -> Decision:
        decision = self.tracker.after_start_error(recoverable)
        self._persist_tracker()
        return decision

    def _after_exit(self, task: Task, result: ExitResult, recoverable: bool = True) -> Decision | None:
        """Record the exit and decide what comes next; a task whose driver failed
        (``recoverable`` false) is not restarted."""
        with self._lock:
            self._handle = None
        self._set(exit_code=result.exit_code, handle_state=None)
        self.emit(events.TERMINATED, _describe_exit(result), exit_code=result.exit_code, signal=result.signal,
                  oom_killed=result.oom_killed, error=result.error)
        self.hooks.task_exited(task, self.ctx, result)
        if self._kill_requested.is_set():
            self.emit(events.KILLED, "Task successfully killed")
            return None
        if self._restart_requested.is_set():
            self._restart_requested.clear()
            if self._restart_failure:
                decision = self.tracker.after_unhealthy()
                self._persist_tracker()
                return decision
            return Decision(Outcome.RESTART, "Restart requested")
        if not recoverable:
            return self._after_start_error(recoverable=False)
        decision = self.tracker.after_exit(result)
        self._persist_tracker()
        return decision

    def _persist_tracker(self) -> None:
        self._persist(restart_count=self.tracker.count, restart_window_start=self.tracker.window_start)

    def _kill_handle(self, handle: TaskHandle) -> None:
        """prekill hooks, shutdown_delay (cut short by another kill), then kill_signal and force after
        kill_timeout."""
        task = self._running_task
        self.hooks.task_prekill(task, self.ctx)
        if task.shutdown_delay > 0:
            self.emit(events.WAITING_FOR_SHUTDOWN_DELAY, f"Waiting {format_duration(task.shutdown_delay)}",
                      shutdown_delay=task.shutdown_delay)
            self._hurry.wait(task.shutdown_delay)
        sig = parse_signal(task.kill_signal) if task.kill_signal else None
        sent = task.kill_signal or "the stop signal"
        self.emit(events.KILLING, f"Sent {sent}. Waiting {format_duration(task.kill_timeout)} before force killing",
                  kill_timeout=task.kill_timeout, **self._capped)
        try:
            handle.kill(task.kill_timeout, sig)
        except Exception as exc:
            self.emit(events.DRIVER_FAILURE, self.hooks.describe_failure("kill", exc))

    def _cleanup(self) -> None:
        """Cleanup in the documented order; a step raising RecoverableError is
        retried, one raising CleanupLater is called again when due."""
        for phase in CLEANUP_ORDER:
            for attempt in range(CLEANUP_ATTEMPTS + 1):
                try:
                    self.hooks.task_cleanup(self._running_task, self.ctx, phase)
                    break
                except CleanupLater as exc:
                    # What the plugin noted in ``created`` must reach the later call.
                    self._persist(created=self.ctx.created.items())
                    self._defer_cleanup(phase, exc.delay)
                    break
                except RecoverableError as exc:
                    if attempt == CLEANUP_ATTEMPTS:
                        self.emit(events.TASK_HOOK_FAILED,
                                  self.hooks.describe_failure("herder_task_cleanup", exc))
                        break
                    time.sleep(CLEANUP_BASE_DELAY * 2**attempt)
                except Exception as exc:
                    self.emit(events.TASK_HOOK_FAILED, self.hooks.describe_failure("herder_task_cleanup", exc),
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


def cap_kill_times(task: Task, ceiling: float | None) -> tuple[Task, dict[str, Any]]:
    """``task`` with its ``kill_timeout`` and ``shutdown_delay`` at most ``ceiling`` seconds (None: no
    ceiling), as Nomad caps ``kill_timeout`` by its client's ``max_kill_timeout``; and, for the
    ``Killing`` event's details, what the job asked for where it was capped."""
    if ceiling is None:
        return task, {}
    asked = {name: getattr(task, name) for name in ("kill_timeout", "shutdown_delay")}
    capped = {f"requested_{name}": value for name, value in asked.items() if value > ceiling}
    if not capped:
        return task, {}
    task = dataclasses.replace(task, **{name: min(value, ceiling) for name, value in asked.items()})
    return task, {**capped, "max_kill_timeout": ceiling}


def started_details(handle: TaskHandle) -> dict[str, Any]:
    """What the handle says of how its task runs, for the ``Started`` event's details: its optional
    ``started_details`` mapping (the java driver tells whether the JVM is isolated); none without."""
    details = getattr(handle, "started_details", None)
    return dict(details) if isinstance(details, Mapping) else {}
