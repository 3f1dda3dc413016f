"""The steps of a task's life, each written once for every front end.

The order they come in is :class:`herder.client.script.TaskScript`'s, and only
its: ``herder run`` and the agent (through :class:`herder.client.task_runner.TaskRunner`),
the conformance kit's harness (:class:`herder.testing.TaskRun`) and the Nomad
integration drive that script, never the steps themselves. The steps:

1. :meth:`TaskLifecycle.prepare`: the environment (herder's variables, then the
   task's ``env`` interpolated against them) and the task interpolated against it;
2. :meth:`TaskLifecycle.validate`: the task's ``config`` against its driver's schema;
3. :meth:`TaskLifecycle.prestart`: ``herder_task_prestart`` in :data:`PRESTART_ORDER`;
4. :meth:`TaskLifecycle.start`: ``herder_task_start``, with the task interpolated
   again (prestart may have changed the environment); or :meth:`TaskLifecycle.recover`;
5. :meth:`TaskLifecycle.poststart`;
6. :meth:`TaskLifecycle.watch` (:class:`ExitWatch`), then :meth:`TaskLifecycle.exited`;
7. :meth:`TaskLifecycle.prekill` (``herder_task_prekill``), ``shutdown_delay``, then
   :meth:`TaskLifecycle.kill_handle` (``Killing``, then the handle's kill with
   ``kill_signal`` and ``kill_timeout``);
8. :meth:`TaskLifecycle.cleanup`: ``herder_task_cleanup`` in :data:`CLEANUP_ORDER`,
   a step that raised :class:`RecoverableError` tried again with growing delays,
   one that raised :class:`CleanupLater` handed back to be called again when due
   (:meth:`TaskLifecycle.cleanup_step`).

What a front end does around them is its own: the task runner records
events, persists state and follows the restart policy; the harness raises what a
hook raised; the Nomad integration answers Nomad. Every wait of the steps
(``shutdown_delay``, the delays between cleanup retries) ends at once when the
``interrupt`` event is set: a stop never waits out a sleep.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from herder import events
from herder.context import TaskContext
from herder.errors import CleanupLater, RecoverableError
from herder.model import Task
from herder.objects import ExitResult, TaskHandle, parse_signal
from herder.plugins.hooks import CLEANUP_ORDER, PRESTART_ORDER, Hooks, Participants
from herder.sdk.durations import format_duration

log = logging.getLogger(__name__)

CLEANUP_RETRIES = 4
"""How many times a cleanup step that raised RecoverableError is tried again."""
CLEANUP_BASE_DELAY = 0.5
"""The wait before the first retry of a cleanup step; it doubles at each retry."""

HANDLE_LOST = ExitResult(exit_code=-1, error="the driver lost track of the task")
"""How a task whose handle failed ended (it is killed, so that it never runs unwatched)."""

Lookup = Callable[[str], "str | None"]
MakeLookup = Callable[[dict[str, str]], Lookup]
"""Resolves ``${...}`` references against a given environment (see :class:`herder.client.placement.PlacedTask`)."""


@dataclass(frozen=True)
class Step:
    """The hook being called, and who takes part: what a failure is reported against."""

    hook: str
    who: Participants = "all"


class Exit(NamedTuple):
    """How a task ended, and whether its handle was lost (the driver failed: no restart)."""

    result: ExitResult
    lost: bool = False


@dataclass
class CleanupReport:
    """What the cleanup steps left: those to call again later, and those that failed for good."""

    later: list[tuple[Participants, CleanupLater]] = field(default_factory=list)
    failed: list[tuple[Participants, Exception]] = field(default_factory=list)


def config_errors(hooks: Hooks, task: Task, where: str) -> list[str]:
    """Problems of ``task.config`` against its driver's schema, each named from ``where``.

    :raises DriverError: the driver cannot give its schema (it is broken).
    """
    # Imported here: herder.jobspec brings the job file parsers, which the Nomad plugin's start
    # (at every Nomad agent start, twice) does not need.
    from herder.jobspec.task_config import validate_config

    return validate_config(where, task.config, hooks.task_schema(task.driver))


def cleanup_step(hooks: Hooks, task: Task, ctx: TaskContext, who: Participants,
                 interrupt: threading.Event) -> CleanupLater | None:
    """One step of cleanup; a step that raises RecoverableError is tried again up to
    :data:`CLEANUP_RETRIES` times, after growing delays that ``interrupt`` cuts short (the
    step is then given up).

    :returns: the step's :class:`CleanupLater` when it asked to be called again later.
    :raises Exception: what the step raised when it failed for good.
    """
    for attempt in range(CLEANUP_RETRIES + 1):
        try:
            hooks.task_cleanup(task, ctx, who)
            return None
        except CleanupLater as later:
            return later
        except RecoverableError:
            if attempt == CLEANUP_RETRIES or interrupt.wait(CLEANUP_BASE_DELAY * 2**attempt):
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


class TaskLifecycle:
    """The steps of one task, called through ``hooks`` with ``ctx``.

    ``spec`` is the task as placed. ``make_lookup`` resolves ``${...}`` references;
    without it (the Nomad integration: Nomad interpolated the task already) the
    task is taken as it is. ``interrupt`` ends every wait of the steps at once.
    ``kill_details`` are more details of the ``Killing`` event.
    """

    def __init__(self, hooks: Hooks, spec: Task, ctx: TaskContext, *, make_lookup: MakeLookup | None = None,
                 interrupt: threading.Event | None = None, kill_details: Mapping[str, Any] | None = None) -> None:
        self.hooks = hooks
        self.spec = spec
        self.ctx = ctx
        self.interrupt = interrupt or threading.Event()
        self.task = spec
        """The task as the hooks see it: interpolated for the current run once prepared."""
        self.step = Step("")
        """The hook being called (the last one called once the steps are over)."""
        self._make_lookup = make_lookup
        self._base_env = dict(ctx.env)
        self._env_task = spec
        self._kill_details = dict(kill_details or {})

    def add_environment(self, env: Mapping[str, str]) -> None:
        """Variables of herder's own that are known only once the allocation is set up (its network's),
        for every run from now on."""
        self._base_env.update(env)
        self.ctx.env.update(env)

    # -- starting -------------------------------------------------------------------

    def prepare(self) -> Task:
        """A fresh environment (herder's variables, then the task's ``env`` interpolated
        against them) and the task interpolated against it: before every run."""
        if self._make_lookup is None:
            return self.task
        from herder.jobspec.interpolate import interpolate

        env = interpolate(self.spec.env, self._make_lookup(self._base_env))
        self.ctx.env.clear()
        self.ctx.env.update(self._base_env)
        self.ctx.env.update(env)
        self._env_task = dataclasses.replace(self.spec, env=env)
        return self.interpolate()

    def interpolate(self) -> Task:
        """The task interpolated against the environment as it is now: again after
        prestart, whose hooks may change it (a driver that maps ports sets the port
        the task listens on)."""
        if self._make_lookup is not None:
            from herder.jobspec.interpolate import interpolate_task

            self.task = interpolate_task(self._env_task, self._make_lookup(dict(self.ctx.env)))
        return self.task

    def validate(self, where: str) -> list[str]:
        """See :func:`config_errors`."""
        self.step = Step("herder_driver_task_schema", "driver")
        return config_errors(self.hooks, self.task, where)

    def prestart(self) -> None:
        """Every step of prestart; raises what a plugin raised (RecoverableError: try again)."""
        for who in PRESTART_ORDER:
            self.step = Step("herder_task_prestart", who)
            self.hooks.task_prestart(self.task, self.ctx, who)

    def start(self) -> TaskHandle:
        """``herder_task_start`` with the task interpolated against the environment prestart left."""
        task = self.interpolate()
        self.step = Step("herder_task_start", "driver")
        return self.hooks.task_start(task, self.ctx)

    def recover(self, state: dict[str, Any]) -> TaskHandle | None:
        """``herder_task_recover``: the task a handle's ``state()`` describes, after a restart of herder
        (the environment is prepared again, prestart is not run). None when it cannot be found."""
        task = self.prepare()
        self.step = Step("herder_task_recover", "driver")
        return self.hooks.task_recover(task, self.ctx, state)

    def poststart(self, handle: TaskHandle) -> None:
        self.step = Step("herder_task_poststart")
        self.hooks.task_poststart(self.task, self.ctx, handle)

    # -- running --------------------------------------------------------------------

    def watch(self, handle: TaskHandle) -> ExitWatch:
        """What tells when the task exits, without blocking a thread where the handle can tell."""
        return ExitWatch(self, handle)

    def wait_failed(self, handle: TaskHandle, exc: Exception) -> Exit:
        """The handle's ``wait`` raised ``exc``: the task is lost, and killed."""
        self.ctx.emit_event(events.DRIVER_FAILURE, self.hooks.describe_failure("wait", exc))
        return Exit(self.kill_lost(handle), lost=True)

    def no_result(self, handle: TaskHandle) -> Exit:
        """The handle's ``wait`` without a timeout returned no result: the task is lost, and killed."""
        self.ctx.emit_event(events.DRIVER_FAILURE, f"driver {self.task.driver} returned no exit result")
        return Exit(self.kill_lost(handle), lost=True)

    def exited(self, result: ExitResult) -> None:
        self.step = Step("herder_task_exited")
        self.hooks.task_exited(self.task, self.ctx, result)

    def kill_lost(self, handle: TaskHandle) -> ExitResult:
        """Kill a task whose handle failed, at once."""
        try:
            handle.kill(0, None)
        except Exception as exc:
            log.warning("task %s: cannot kill a task whose handle failed: %s", self.task.name, exc)
        return HANDLE_LOST

    def prekill(self) -> float:
        """``herder_task_prekill``; the ``shutdown_delay`` to wait before :meth:`kill_handle` (0: none),
        announced by a ``Waiting for shutdown delay`` event."""
        task = self.task
        self.step = Step("herder_task_prekill")
        self.hooks.task_prekill(task, self.ctx)
        if task.shutdown_delay > 0:
            self.ctx.emit_event(events.WAITING_FOR_SHUTDOWN_DELAY, f"Waiting {format_duration(task.shutdown_delay)}",
                                shutdown_delay=task.shutdown_delay)
        return max(0.0, task.shutdown_delay)

    def kill_handle(self, handle: TaskHandle, *, timeout: float | None = None, sig: int | None = None) -> None:
        """``Killing``, then the handle's kill: ``sig`` (else the task's ``kill_signal``, else the
        driver's stop signal), and by force after ``timeout`` (else the task's ``kill_timeout``) seconds.

        :raises Exception: what the handle's kill raised.
        """
        task = self.task
        if sig is None and task.kill_signal:
            sig = parse_signal(task.kill_signal)
        timeout = task.kill_timeout if timeout is None else timeout
        sent = _signal_name(sig) if sig is not None else "the stop signal"
        self.ctx.emit_event(events.KILLING, f"Sent {sent}. Waiting {format_duration(timeout)} before force killing",
                            kill_timeout=timeout, **self._kill_details)
        self.step = Step("kill", "driver")
        handle.kill(timeout, sig)

    # -- cleaning up ----------------------------------------------------------------

    def cleanup(self) -> CleanupReport:
        """Every step of cleanup, in :data:`CLEANUP_ORDER`, each even if one before failed."""
        report = CleanupReport()
        for who in CLEANUP_ORDER:
            try:
                later = self.cleanup_step(who)
            except Exception as exc:
                report.failed.append((who, exc))
                continue
            if later is not None:
                report.later.append((who, later))
        return report

    def cleanup_step(self, who: Participants) -> CleanupLater | None:
        """One step of cleanup (see :func:`cleanup_step`): also the later call of a step that
        raised :class:`CleanupLater`."""
        self.step = Step("herder_task_cleanup", who)
        return cleanup_step(self.hooks, self.task, self.ctx, who, self.interrupt)


class ExitWatch:
    """Tells when a task has exited, for a front end that must not hold a thread per task.

    A handle with an ``on_exit`` method (see :class:`herder.objects.TaskHandle`: the SDK's
    :class:`herder.sdk.SupervisedProcess` has one, fed by the supervisor's exit notices)
    is asked to call back; :meth:`poll` then asks the handle with ``wait(0)``. A handle
    without one is waited for by a thread of its own, parked in its blocking ``wait()``:
    a shared poller calling ``wait(0)`` in turn would instead make each driver's
    ``wait`` (an HTTP call for docker) again and again, and learn of every exit late.
    """

    def __init__(self, lifecycle: TaskLifecycle, handle: TaskHandle) -> None:
        self._lifecycle = lifecycle
        self._handle = handle
        self._lock = threading.Lock()
        self._notify: Callable[[], None] | None = None
        self._subscribed = False
        self._exited = False
        self._thread: threading.Thread | None = None
        self._outcome: ExitResult | Exception | None = None

    def arm(self, notify: Callable[[], None]) -> None:
        """Have ``notify`` called once (from any thread; it must be quick) when :meth:`poll` may
        have the exit; at once if it may already."""
        with self._lock:
            exited = self._exited
            if not exited:
                self._notify = notify
                subscribe, self._subscribed = not self._subscribed, True
        if exited:
            notify()
        elif subscribe:
            self._subscribe()

    def wait(self, timeout: float | None) -> Exit | None:
        """Wait up to ``timeout`` seconds (None: without a bound) in the handle's own ``wait``, for a
        front end that steps its script synchronously; None when the task has not exited."""
        lifecycle, handle = self._lifecycle, self._handle
        try:
            result = handle.wait(timeout)
        except Exception as exc:
            return lifecycle.wait_failed(handle, exc)
        if result is None:
            return lifecycle.no_result(handle) if timeout is None else None
        return Exit(result)

    def poll(self) -> Exit | None:
        """How the task exited (a lost handle's task killed, as in :meth:`wait`);
        None when it has not (the notice was early): then :meth:`arm` again."""
        lifecycle, handle = self._lifecycle, self._handle
        if self._thread is None:
            try:
                result = handle.wait(0)
            except Exception as exc:
                return lifecycle.wait_failed(handle, exc)
            if result is None:
                with self._lock:
                    self._exited = self._subscribed = False
                return None
            return Exit(result)
        outcome = self._outcome
        if isinstance(outcome, Exception):
            return lifecycle.wait_failed(handle, outcome)
        if outcome is None:  # waited for without a timeout, and no result
            return lifecycle.no_result(handle)
        return Exit(outcome)

    def _subscribe(self) -> None:
        on_exit = getattr(self._handle, "on_exit", None)
        try:
            if callable(on_exit) and on_exit(self._exit):
                return
        except Exception:  # an on_exit that fails: the handle is waited for in a thread instead
            log.exception("task %s: the handle's on_exit failed", self._lifecycle.task.name)
        self._thread = threading.Thread(target=self._wait, name=f"wait-{self._lifecycle.task.name}", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        try:
            self._outcome = self._handle.wait()
        except Exception as exc:
            self._outcome = exc
        self._exit()

    def _exit(self) -> None:
        with self._lock:
            self._exited = True
            notify, self._notify = self._notify, None
        if notify is not None:
            notify()


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:  # a real-time signal has no name of its own
        return f"signal {sig}"
