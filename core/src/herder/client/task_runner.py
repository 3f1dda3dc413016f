"""The task runner: one task of one allocation, from setup to cleanup.

The runner drives the task's script (:class:`herder.client.script.TaskScript`:
prepare, prestart, start, wait, and, on the final stop, prekill, kill and
cleanup) and answers what the script asks of a front end: it takes a handle
and persists its state, records how the task exited, and decides by the
restart policy whether the task runs again. Every concern that is not the
script itself (the environment, images, services) is a hook. Every change of
state is persisted as it happens, so a herder started again on the same data
dir picks the task up where it was: :meth:`TaskRunner.start` with a stored
handle state reattaches to the running task instead of starting it again.

The runner holds no thread of its own. The script is a generator: its steps
run on a worker of the client's pool (:mod:`herder.client.runtime`), and
where it waits (for the task's exit, a restart delay, ``shutdown_delay``) it
yields what it waits for and the runner lets the worker go. The runner
resumes it on a worker once that has come: the exit through the handle's
``on_exit`` (:class:`herder.client.lifecycle.ExitWatch`), a delay from the
pool's timer, or a kill, which ends the waits it cuts short. One step of a
runner runs at a time, so the script reads as if it had a thread.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, Unpack

from herder import events
from herder.client.lifecycle import CleanupReport, TaskLifecycle
from herder.client.placement import PlacedTask
from herder.client.restarts import Decision, Outcome, RestartTracker
from herder.client.runtime import Runtime, shared_runtime
from herder.client.script import (
    AwaitExit,
    Ended,
    Failed,
    KillHandle,
    Prestarted,
    Ran,
    Running,
    Sleep,
    TaskScript,
    Wait,
    Woke,
    run_through,
)
from herder.client.script import Outcome as RunOutcome
from herder.model import Task
from herder.objects import AllocNetwork, ExecResult, ExecSession, TaskEvent, TaskHandle
from herder.plugins.hooks import Hooks, Participants
from herder.sdk.durations import format_duration
from herder.state import EVENTS_KEPT, TaskState

log = logging.getLogger(__name__)

KILL_LATENCY = 0.5
"""How long a task's kill may wait for a worker before it runs on a thread of its own."""


@dataclass
class TaskStatus:
    """What the outside world sees of a task runner: the task's stored record, and its events."""

    state: TaskState = "pending"
    failed: bool = False
    restarts: int = 0
    exit_code: int | None = None
    events: list[TaskEvent] = field(default_factory=list)
    """The task's last events, at most :data:`~herder.state.EVENTS_KEPT` as the store keeps."""
    handle_state: dict[str, Any] | None = None
    """The running task's handle ``state()``, for ``herder_task_recover``."""
    created: list[tuple[str, str]] = field(default_factory=list)
    """The task's ``ctx.created`` items, for cleanup after a restart of herder."""
    started_at: float | None = None
    finished_at: float | None = None


class StatusChanges(TypedDict, total=False):
    """Changed fields of a :class:`TaskStatus` (its events are stored on their own)."""

    state: TaskState
    failed: bool
    restarts: int
    exit_code: int | None
    handle_state: dict[str, Any] | None
    created: list[tuple[str, str]]
    started_at: float | None
    finished_at: float | None


class TaskChanges(StatusChanges, total=False):
    """Changed fields of a task's stored record: its status, and its restart policy's counter."""

    restart_count: int
    restart_window_start: float | None


class PersistTask(Protocol):
    """Stores changed fields of the task's record, as :meth:`herder.state.Store.update_task` does."""

    def __call__(self, **changes: Unpack[TaskChanges]) -> None: ...


DeferCleanup = Callable[[Participants, float], None]
"""Has a cleanup step that raised :class:`herder.CleanupLater` called again after a delay."""


class TaskRunner:
    """Runs one task: the steps of :class:`herder.client.lifecycle.TaskLifecycle`, in a loop that
    restarts the task by its restart policy, on the workers of ``runtime`` (else the process's).

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
                 persist: PersistTask, defer_cleanup: DeferCleanup, status: TaskStatus | None = None,
                 recover: dict[str, Any] | None = None, max_kill_timeout: float | None = None,
                 runtime: Runtime | None = None) -> None:
        self.task, capped = cap_kill_times(placed.task, max_kill_timeout)
        self.ctx = placed.ctx
        self.hooks = hooks
        self.tracker = tracker
        self.status = status or TaskStatus()
        self._on_event = on_event
        self._on_dead = on_dead
        self._persist = persist
        self._defer_cleanup = defer_cleanup
        self._recover = recover
        self._lock = threading.RLock()
        self._handle: TaskHandle | None = None
        self._kill_requested = self.ctx.stopping  # what a prestart hook that waits gives up on
        self._hurry = threading.Event()  # a second kill: no wait of the lifecycle is waited out
        self._lifecycle = TaskLifecycle(hooks, self.task, self.ctx, make_lookup=placed.make_lookup,
                                        interrupt=self._hurry, kill_details=capped)
        self._restart_requested = threading.Event()
        self._restart_failure = False
        self._done = threading.Event()
        self._when_done: list[Callable[[], None]] = []
        self._started = False
        if self.status.state == "dead":  # restored from state: finished for good already
            self._done.set()
        self._runtime = runtime or shared_runtime()
        self._script = TaskScript(self._lifecycle, self._kill_requested, f"task {self.task.name}")
        self._steps = self._run()
        self._waiting: Wait | None = None
        self._restarting = False
        self._restart_delay: Wait | None = None
        self.ctx.emitter = self._record

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def handle(self) -> TaskHandle | None:
        """The running task's handle; None before it starts and once it has exited."""
        with self._lock:
            return self._handle

    @property
    def stopping(self) -> bool:
        """The task is being stopped for good: a prestart hook that waits can give up."""
        return self._kill_requested.is_set()

    # -- events and state -----------------------------------------------------

    def _record(self, event: TaskEvent) -> None:
        with self._lock:
            self.status.events.append(event)
            del self.status.events[:-EVENTS_KEPT]
        self.hooks.task_event(self._lifecycle.task, self.ctx, event)
        self._on_event(self, event)

    def emit(self, type: str, message: str = "", **details: Any) -> None:
        self.ctx.emit_event(type, message, **details)

    def join_network(self, network: AllocNetwork, env: Mapping[str, str]) -> None:
        """Before the task starts: it runs in ``network`` (its allocation's namespace), with the
        variables ``env`` (the ports as seen from inside it) over herder's own."""
        self.ctx.network = network
        self._lifecycle.add_environment(env)

    def _set(self, **changes: Unpack[StatusChanges]) -> None:
        """Change the task's state, here and in the store."""
        with self._lock:
            self.status = dataclasses.replace(self.status, **changes)
        self._persist(**changes)

    # -- control from other threads -----------------------------------------

    @property
    def started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Start the task's loop; it is started once, later calls do nothing."""
        with self._lock:
            if self._started:
                return
            self._started = True
        self._runtime.pool.submit(functools.partial(self._advance, None))

    def when_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the task is dead and cleaned up (at once if it is)."""
        with self._lock:
            if not self._done.is_set():
                self._when_done.append(callback)
                return
        callback()

    def fail_setup(self, message: str) -> None:
        """Fail the task without starting it (its allocation could not be set up).

        A task an earlier herder left running is reattached only to be killed
        and cleaned up, as any task being stopped (returns at once then: see
        :meth:`when_done`): it must not run on beside the allocation that may
        replace its own."""
        if self._recover is not None:
            self._set(failed=True)
            self.request_kill(TaskEvent(events.SETUP_FAILURE, message))
            return
        self.emit(events.SETUP_FAILURE, message)
        self._set(failed=True, state="dead", finished_at=time.time())
        self._finished()

    def kill(self, reason: TaskEvent | None = None) -> None:
        """:meth:`request_kill`, and return once the task is dead (see :meth:`wait`)."""
        self.request_kill(reason)
        self.wait()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task is dead and cleaned up; False on timeout. Not from a worker of
        the pool: the task's own steps may need it."""
        return self._done.wait(timeout)

    def request_kill(self, reason: TaskEvent | None = None) -> None:
        """Stop the task for good (gracefully, then by force); returns at once (see :meth:`when_done`).

        A kill while another is under way ends its waits (``shutdown_delay``, cleanup retries) at once."""
        with self._lock:
            first = not self._kill_requested.is_set()
            if not first:
                self._hurry.set()
            self._kill_requested.set()
        if first and reason is not None and not self._done.is_set():
            self._record(reason)
        if not self._done.is_set():
            self.start()  # a task killed before it started: its loop only cleans up
        self._poke()

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
        run_through(self._script.kill(handle))

    def signal(self, sig: int) -> None:
        with self._lock:
            handle = self._handle
        if handle is not None:
            self._script.signal(handle, sig)

    def exec(self, command: list[str], timeout: float) -> ExecResult:
        return self._script.exec(self._running(), command, timeout)

    def exec_session(self, command: list[str], tty: bool) -> ExecSession:
        """Start ``command`` in the task interactively; the caller closes the session."""
        return self._script.exec_session(self._running(), command, tty)

    def _running(self) -> TaskHandle:
        with self._lock:
            handle = self._handle
        if handle is None:
            raise RuntimeError(f"task {self.name} is not running")
        return handle

    # -- the script's waits ---------------------------------------------------

    def _advance(self, value: object) -> None:
        """Run the script on a worker up to its next wait, and wait for that without the worker; what
        the runner answers at once (a handle to take, an exit to note, a kill to make, a run's end to
        decide on) it answers here."""
        while True:
            try:
                wait = self._steps.send(value)
            except StopIteration:
                return
            if isinstance(wait, Sleep | AwaitExit):
                break
            value = self._answer(wait)
        with self._lock:
            self._waiting = wait
            if self._restarting:
                self._restart_delay, self._restarting = wait, False
        if isinstance(wait, Sleep):
            wait.cancel = self._runtime.timer.call_later(wait.seconds, functools.partial(self._resume, wait, False))
        else:
            wait.watch.arm(functools.partial(self._resume, wait, Woke.EXITED))
        self._poke()

    def _answer(self, wait: Prestarted | Running | Ended | KillHandle | Ran) -> object:
        if isinstance(wait, Prestarted):
            return None
        if isinstance(wait, Running):
            return self._adopt(wait.handle)
        if isinstance(wait, Ended):
            with self._lock:
                self._handle = None
            self._set(exit_code=wait.exit.result.exit_code, handle_state=None)
            return None
        if isinstance(wait, KillHandle):
            # The handle's kill may take the task's kill_timeout: on a worker, or a thread of its own
            # if none takes it within KILL_LATENCY, while the script waits for the exit.
            kill = wait.kill

            def make_kill() -> None:
                kill()  # a kill that failed for good is reported already: a Driver Failure

            self._runtime.pool.submit(make_kill, within=KILL_LATENCY)
            return None
        decision = self._decide(wait.outcome)
        if decision is None:
            return None
        if decision.outcome is Outcome.RESTART:
            self.emit(events.RESTARTING, f"Task restarting in {format_duration(decision.delay)}",
                      restart_delay=decision.delay, reason=decision.reason)
            self._restarting = True  # the script's next wait is the restart delay
            return decision.delay
        if decision.outcome is Outcome.FAIL:
            self._set(failed=True)
        self.emit(events.NOT_RESTARTING, decision.reason, reason=decision.reason)
        return None

    def _poke(self) -> None:
        """End the current wait if what cuts it short has come (a kill, a second one)."""
        with self._lock:
            wait = self._waiting
        if isinstance(wait, Sleep) and wait.interrupt.is_set():
            self._resume(wait, True)
        elif isinstance(wait, AwaitExit) and wait.killable and self._kill_requested.is_set():
            self._resume(wait, Woke.KILL)

    def _resume(self, wait: Wait, value: object) -> None:
        """End ``wait`` (if it is the current one: the first to end it wins) and go on with ``value``.
        Called from any thread: a timer's, the supervisor connection's; quick."""
        with self._lock:
            if self._waiting is not wait:
                return
            self._waiting = None
            restarts = wait is self._restart_delay and value is False  # the delay is over: the task runs again
        if isinstance(wait, Sleep) and wait.cancel is not None:
            wait.cancel()
        if restarts:
            self._set(restarts=self.status.restarts + 1)
        self._runtime.pool.submit(functools.partial(self._advance, value))

    def _finished(self) -> None:
        """The task is dead and cleaned up: tell whoever waits for it."""
        with self._lock:
            self._done.set()
            callbacks, self._when_done = self._when_done, []
        for callback in callbacks:
            callback()

    # -- the script ----------------------------------------------------------

    def _run(self) -> Generator[Wait, Any, None]:
        report: CleanupReport | None = None
        try:
            report = yield from self._script.life(self._recover)
        except Exception as exc:  # a bug of ours must still leave a dead, cleaned-up task
            log.exception("task runner %s crashed", self.name)
            self._set(failed=True)
            self.emit(events.DRIVER_FAILURE, f"internal error: {exc}")
        finally:
            self._cleaned_up(report if report is not None else self._script.cleanup())
            self._set(state="dead", handle_state=None, finished_at=time.time())
            self._finished()
            self._on_dead(self)

    def _decide(self, outcome: RunOutcome) -> Decision | None:
        """What comes after a run that ended with ``outcome``; None: nothing (the task was killed)."""
        if isinstance(outcome, Failed):
            return self._after_start_error(outcome.recoverable)
        if outcome is None or self._kill_requested.is_set():
            return None
        if self._restart_requested.is_set():
            self._restart_requested.clear()
            if self._restart_failure:
                decision = self.tracker.after_unhealthy()
                self._persist_tracker()
                return decision
            return Decision(Outcome.RESTART, "Restart requested")
        if outcome.lost:  # the driver failed: not restarted
            return self._after_start_error(recoverable=False)
        decision = self.tracker.after_exit(outcome.result)
        self._persist_tracker()
        return decision

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

    def _after_start_error(self, recoverable: bool) -> Decision:
        decision = self.tracker.after_start_error(recoverable)
        self._persist_tracker()
        return decision

    def _persist_tracker(self) -> None:
        self._persist(restart_count=self.tracker.count, restart_window_start=self.tracker.window_start)

    def _cleaned_up(self, report: CleanupReport) -> None:
        """After the script's cleanup: a step that asked to finish later is deferred, one that
        failed is a ``Task hook failed`` event."""
        if report.later:
            # What the plugins noted in ``created`` must reach the later calls.
            self._set(created=self.ctx.created.items())
        for who, later in report.later:
            self._defer_cleanup(who, later.delay)
        for _, exc in report.failed:
            self.emit(events.TASK_HOOK_FAILED, self.hooks.describe_failure("herder_task_cleanup", exc),
                      hook="herder_task_cleanup", plugin=self.hooks.plugins.blame(exc))


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
