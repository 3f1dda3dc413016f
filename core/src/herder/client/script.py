"""The order of a task's life, written once: a generator that every front end drives.

:class:`TaskScript` strings the steps of :class:`herder.client.lifecycle.TaskLifecycle`
together: prepare and validate, prestart, start (or recover), poststart, the
exit (with the kill path when a kill comes first: prekill, ``shutdown_delay``,
the handle's kill tried again after growing delays), exited; then, as the front
end decides, the same again (a restart) or cleanup. It never waits itself: it
yields what it waits for, and the front end answers.

- :class:`Sleep`: ``seconds`` to pass, cut short by ``interrupt`` (the answer is True then);
- :class:`AwaitExit`: the task's exit; the answer is :data:`Woke.EXITED` (ask the
  watch), the :class:`Exit` itself (a front end that waited for it), or, when
  ``killable``, :data:`Woke.KILL` or a :class:`Stop` (a kill with the front end's signal and timeout);
- :class:`KillHandle`: a call that may block up to the task's ``kill_timeout``; the
  front end makes it where blocking is allowed, and answers at once;
- :class:`Prestarted`: prestart is done; answered at once;
- :class:`Running`: a started or recovered handle; the answer is whether the front end
  took it (False: its state cannot be had, and the task is killed as lost);
- :class:`Ended`: the task exited (before ``Terminated``); answered at once;
- :class:`Ran`: one run is over; the answer is the delay before the next run, or None
  for none (cleanup follows).

The task runner (:mod:`herder.client.task_runner`) answers on the shared pool
without holding a thread; the conformance harness (:mod:`herder.testing.harness`)
and the Nomad plugin answer synchronously, each call of theirs advancing the
script to its next wait. None of them calls a step of the sequence itself.
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from herder import events
from herder.client.lifecycle import CleanupReport, Exit, ExitWatch, TaskLifecycle
from herder.errors import DriverError, RecoverableError
from herder.objects import ExecResult, ExecSession, ExitResult, TaskHandle

KILL_RETRIES = 3
"""How many times a handle's kill that failed is tried again (Nomad's ``killTask`` tries again too)."""
KILL_BASE_DELAY = 0.25
"""The wait before the first retry of a handle's kill; it doubles at each retry."""

LOST = ExitResult(exit_code=-1, error="the task could not be reattached")
"""How a task that was running when herder stopped, and cannot be found again, ended."""


class Woke(enum.Enum):
    """Why the wait for a task's exit ended."""

    EXITED = "exited"  # the handle says its task exited: ask it how
    KILL = "kill"  # the task is to be killed


@dataclass(frozen=True)
class Stop:
    """An answer to :class:`AwaitExit`: kill the task with ``sig`` and ``timeout`` (None: the task's)."""

    timeout: float | None = None
    sig: int | None = None


@dataclass(eq=False)
class Sleep:
    """``seconds`` to pass, or ``interrupt`` (the script resumes with True then)."""

    seconds: float
    interrupt: threading.Event
    cancel: Callable[[], None] | None = None


@dataclass(eq=False)
class AwaitExit:
    """The task's exit, or (when ``killable``) a kill."""

    watch: ExitWatch
    killable: bool


@dataclass(eq=False)
class KillHandle:
    """The handle's kill, which may take the task's ``kill_timeout``: made by the front end, answered at
    once. The call returns what the kill raised when it failed for good (it is reported already)."""

    kill: Callable[[], Exception | None]


@dataclass(eq=False)
class Prestarted:
    """Prestart is done; the task starts next (a test of the harness may change its environment now)."""


@dataclass(eq=False)
class Running:
    """A handle started (``recovered`` false) or found again: does the front end take it?"""

    handle: TaskHandle
    recovered: bool


@dataclass(frozen=True)
class Failed:
    """The task did not start: the event ``kind`` with ``message``, and what was raised (None: the
    configuration's ``errors``)."""

    kind: str
    message: str
    recoverable: bool
    error: Exception | None = None
    errors: list[str] = field(default_factory=list)


Outcome = Failed | Exit | None
"""How one run ended: it did not start, it exited, or (None) it was killed before it started."""


@dataclass(eq=False)
class Ran:
    """One run ended with ``outcome``: the delay before the next run, or None to clean up."""

    outcome: Outcome


@dataclass(eq=False)
class Ended:
    """The task exited: the front end learns it before anyone hears of it (``Terminated``)."""

    exit: Exit


Wait = Sleep | AwaitExit | KillHandle | Prestarted | Running | Ended | Ran
Steps = Generator[Wait, Any, CleanupReport]


class TaskScript:
    """The order of one task's life, through ``lifecycle``. ``stopping`` is set when the task is to
    stop for good (a kill); ``where`` names the task in configuration errors."""

    def __init__(self, lifecycle: TaskLifecycle, stopping: threading.Event, where: str) -> None:
        self.lifecycle = lifecycle
        self.stopping = stopping
        self.where = where

    def life(self, recover: dict[str, Any] | None = None) -> Steps:
        """Every run of the task (from ``recover``, a handle's stored state, first if given), as the
        answers to :class:`Ran` decide; then cleanup, whose report is returned."""
        if recover is None and not self.stopping.is_set():
            self.lifecycle.ctx.emit_event(events.TASK_SETUP, "Building Task Directory")
        outcome = yield from (self._reattach(recover) if recover is not None else self._run())
        while (delay := (yield Ran(outcome))) is not None:
            if (yield Sleep(delay, self.stopping)):
                break
            outcome = yield from self._run()
        return self.cleanup()

    def cleanup(self) -> CleanupReport:
        """The end of the task's life (also of one whose script failed on the way: a bug)."""
        return self.lifecycle.cleanup()

    # -- one run -------------------------------------------------------------------

    def _run(self) -> Generator[Wait, Any, Outcome]:
        lifecycle = self.lifecycle
        if self.stopping.is_set():
            return None
        lifecycle.prepare()
        try:
            errors = lifecycle.validate(self.where)
        except DriverError as exc:
            return self._failed(Failed(events.DRIVER_FAILURE, str(exc), recoverable=False, error=exc))
        if errors:
            return self._failed(Failed(events.FAILED_VALIDATION, "; ".join(errors), recoverable=False, errors=errors),
                                errors=errors)
        try:
            lifecycle.prestart()
        except Exception as exc:
            # The driver's own preparation failing (an image pull, a refused volume) is the
            # driver failing; a lifecycle plugin failing is the task's setup failing.
            kind = events.DRIVER_FAILURE if lifecycle.step.who == "driver" else events.SETUP_FAILURE
            failed = Failed(kind, lifecycle.hooks.describe_failure(lifecycle.step.hook, exc),
                            recoverable=isinstance(exc, RecoverableError), error=exc)
            self._failed(failed, recoverable=failed.recoverable)
            return None if self.stopping.is_set() else failed  # a hook stopped by the kill: nothing to restart
        yield Prestarted()
        if self.stopping.is_set():
            return None
        try:
            handle = lifecycle.start()
        except Exception as exc:
            recoverable = isinstance(exc, RecoverableError)
            return self._failed(Failed(events.DRIVER_FAILURE, str(exc) or type(exc).__name__,
                                       recoverable=recoverable, error=exc), recoverable=recoverable)
        return (yield from self._running(handle, recovered=False))

    def _failed(self, failed: Failed, **details: Any) -> Failed:
        self.lifecycle.ctx.emit_event(failed.kind, failed.message, **details)
        return failed

    def _reattach(self, state: dict[str, Any]) -> Generator[Wait, Any, Outcome]:
        """The task an earlier herder started; one that cannot be found ended as :data:`LOST`."""
        lifecycle = self.lifecycle
        try:
            handle = lifecycle.recover(state)
        except Exception as exc:
            lifecycle.ctx.emit_event(events.DRIVER_FAILURE, lifecycle.hooks.describe_failure("herder_task_recover",
                                                                                            exc))
            handle = None
        if handle is None:
            return (yield from self._exited(Exit(LOST)))
        return (yield from self._running(handle, recovered=True))

    def _running(self, handle: TaskHandle, recovered: bool) -> Generator[Wait, Any, Outcome]:
        """Poststart, then the exit; a kill meanwhile kills the task, once."""
        lifecycle = self.lifecycle
        if not (yield Running(handle, recovered)):
            return (yield from self._exited(Exit(lifecycle.kill_lost(handle), lost=True)))
        killed = self.stopping.is_set()
        if killed:  # found (or started) only to be killed
            yield from self.kill(handle)
        else:
            if recovered:
                lifecycle.ctx.emit_event(events.REATTACHED, "Task found running after herder restarted",
                                         handle=handle.id)
            else:
                lifecycle.ctx.emit_event(events.STARTED, "Task started by client", **started_details(handle))
            lifecycle.poststart(handle)
        watch = lifecycle.watch(handle)
        while True:
            woke = yield AwaitExit(watch, killable=not killed)
            if woke is Woke.KILL or isinstance(woke, Stop):
                stop = woke if isinstance(woke, Stop) else Stop()
                killed = True
                yield from self.kill(handle, timeout=stop.timeout, sig=stop.sig)
                continue
            exit = woke if isinstance(woke, Exit) else watch.poll()
            if exit is not None:
                return (yield from self._exited(exit, killed))

    def _exited(self, exit: Exit, killed: bool = False) -> Generator[Wait, Any, Exit]:
        yield Ended(exit)
        result = exit.result
        self.lifecycle.ctx.emit_event(events.TERMINATED, describe_exit(result), exit_code=result.exit_code,
                                      signal=result.signal, oom_killed=result.oom_killed, error=result.error)
        self.lifecycle.exited(result)
        if killed or self.stopping.is_set():
            self.lifecycle.ctx.emit_event(events.KILLED, "Task successfully killed")
        return exit

    # -- the kill path -------------------------------------------------------------

    def kill(self, handle: TaskHandle, *, timeout: float | None = None,
             sig: int | None = None) -> Generator[Wait, Any, None]:
        """Prekill, ``shutdown_delay`` (cut short by the lifecycle's interrupt), then the handle's kill
        (:meth:`kill_handle`). A prekill that fails is a ``Driver Failure``, and the kill is not made."""
        lifecycle = self.lifecycle
        try:
            delay = lifecycle.prekill()
        except Exception as exc:
            lifecycle.ctx.emit_event(events.DRIVER_FAILURE, lifecycle.hooks.describe_failure("kill", exc))
            return
        if delay > 0:
            yield Sleep(delay, lifecycle.interrupt)
        yield KillHandle(functools.partial(self.kill_handle, handle, timeout=timeout, sig=sig))

    def kill_handle(self, handle: TaskHandle, *, timeout: float | None = None,
                    sig: int | None = None) -> Exception | None:
        """The lifecycle's kill of ``handle``, tried again :data:`KILL_RETRIES` times after growing delays
        (cut short by the lifecycle's interrupt); one that fails for good is a ``Driver Failure``.

        :returns: what the last try raised when the kill failed for good.
        """
        lifecycle = self.lifecycle
        for attempt in range(KILL_RETRIES + 1):
            try:
                lifecycle.kill_handle(handle, timeout=timeout, sig=sig)
                return None
            except Exception as exc:
                if attempt == KILL_RETRIES or lifecycle.interrupt.wait(KILL_BASE_DELAY * 2**attempt):
                    lifecycle.ctx.emit_event(events.DRIVER_FAILURE, lifecycle.hooks.describe_failure("kill", exc))
                    return exc
        raise AssertionError("unreachable: the last try returns")

    # -- into the running task -------------------------------------------------------

    def signal(self, handle: TaskHandle, sig: int) -> None:
        """``Signaling``, then the handle's signal."""
        self.lifecycle.ctx.emit_event(events.SIGNALING, f"Task being sent signal {sig}", signal=sig)
        handle.signal(sig)

    def exec(self, handle: TaskHandle, command: list[str], timeout: float) -> ExecResult:
        lifecycle = self.lifecycle
        return lifecycle.hooks.task_exec(lifecycle.task, lifecycle.ctx, handle, command, timeout)

    def exec_session(self, handle: TaskHandle, command: list[str], tty: bool) -> ExecSession:
        """Start ``command`` in the task interactively; the caller closes the session."""
        lifecycle = self.lifecycle
        return lifecycle.hooks.task_exec_session(lifecycle.task, lifecycle.ctx, handle, command, tty)


def run_through(steps: Generator[Wait, Any, None]) -> Exception | None:
    """A segment of the script that only sleeps and kills (:meth:`TaskScript.kill`), in the caller's thread;
    what the kill raised when it failed for good."""
    value: object = None
    failure: Exception | None = None
    while True:
        try:
            wait = steps.send(value)
        except StopIteration:
            return failure
        if isinstance(wait, Sleep):
            value = wait.interrupt.wait(wait.seconds)
        elif isinstance(wait, KillHandle):
            failure, value = wait.kill(), None
        else:
            raise AssertionError(f"the kill path does not wait for {wait!r}")


class Stepper:
    """A script advanced by a front end that answers its waits synchronously, each call of the front
    end's taking it to its next wait: the harness and the Nomad plugin. Not thread-safe: its caller
    advances it under a lock of its own where calls overlap."""

    def __init__(self, steps: Steps) -> None:
        self._steps = steps
        self.at: Wait | None = None
        """The wait the script is at; None before it began and once it is over."""
        self.report: CleanupReport | None = None
        """The cleanup's report, once the script is over."""
        self.handle: TaskHandle | None = None
        self.outcome: Outcome = None
        self.exit: Exit | None = None
        """How the task's last run exited, once it has."""
        self.kill_failure: Exception | None = None
        """What the last kill raised when it failed for good."""
        self.over = False

    def send(self, value: object) -> None:
        """Answer the current wait with ``value`` and run the script up to its next one that the caller
        answers: sleeps, kills and handles it answers itself (a sleep waits, a kill is made, a handle is taken)."""
        while not self.over:
            try:
                wait = self._steps.send(value)
            except StopIteration as stop:
                self.at, self.report, self.over = None, stop.value, True
                return
            self.at = wait
            if isinstance(wait, Sleep):
                value = wait.interrupt.wait(wait.seconds)
            elif isinstance(wait, KillHandle):
                self.kill_failure, value = wait.kill(), None
            elif isinstance(wait, Running):
                self.handle = wait.handle
                value = True
            elif isinstance(wait, Ended):
                self.exit = wait.exit
                value = None
            else:
                if isinstance(wait, Ran):
                    self.outcome = wait.outcome
                return

    def await_exit(self, timeout: float | None) -> Exit | None:
        """Wait up to ``timeout`` seconds (None: without a bound) for the exit the script waits for,
        with the handle's own ``wait``; the exit, which the script is then past, or None."""
        wait = self.at
        if not isinstance(wait, AwaitExit):
            return self.exit
        exit = wait.watch.wait(timeout)
        if exit is not None:
            self.send(exit)
        return exit


def describe_exit(result: ExitResult) -> str:
    parts = [f"Exit Code: {result.exit_code}"]
    if result.signal:
        parts.append(f"Signal: {result.signal}")
    if result.oom_killed:
        parts.append("OOM Killed")
    if result.error:
        parts.append(f"Exit Message: {result.error}")
    return ", ".join(parts)


def started_details(handle: TaskHandle) -> dict[str, Any]:
    """What the handle says of how its task runs, for the ``Started`` event's details: its optional
    ``started_details`` mapping (the java driver tells whether the JVM is isolated); none without."""
    details = getattr(handle, "started_details", None)
    return dict(details) if isinstance(details, Mapping) else {}
