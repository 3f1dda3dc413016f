"""The allocation runner: the tasks of one placed group instance, in their lifecycle order.

The order is Nomad's task coordinator's. Tasks fall in stages by their
``lifecycle`` block, and the allocation moves through phases, each letting
some stages start:

- ``prestart``: the prestart tasks start. The phase ends when every prestart
  task that is not a sidecar has completed successfully and every prestart
  sidecar is running.
- ``main``: the main tasks start (with the prestart sidecars running on); the
  phase ends once no main task is pending.
- ``poststart``: the poststart tasks start; the phase ends when the poststart
  tasks that are not sidecars are dead.
- ``wait``: the main tasks and the sidecars run on.
- ``poststop``: once every other task is dead, the poststop tasks start.

Beside the phases, as in Nomad's alloc runner: a task failed for good kills
the others (``Sibling Task Failed``), a dead leader kills them (``Leader Task
Dead``), and when only sidecars are left they are killed (``Main Tasks
Dead``). Kills go in Nomad's order: the leader, then the other tasks, the
sidecars last. Poststop tasks are never killed by their siblings: they run
after them. A group's ``max_run_duration`` counts from the allocation's
creation (so a restarted agent keeps the deadline); once it has passed,
every task is killed, poststop tasks that have not started never do, and the
allocation is complete, as Nomad's ``max_run_duration`` hook has it.

The runner holds no thread: it reacts to its tasks' changes (see
:mod:`herder.client.runtime`), and is done when the last of them is.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from herder import events
from herder.client.alloc_hooks import AllocHooks
from herder.client.env import isolated_port_environment
from herder.client.network import AllocNetworks
from herder.client.placement import PlacedAlloc, PlacedTask
from herder.client.restarts import RestartTracker
from herder.client.runtime import shared_runtime
from herder.client.task_runner import TaskRunner, TaskStatus
from herder.context import AllocatedPort
from herder.jobspec.interpolate import interpolate
from herder.model import POSTSTART, POSTSTOP, PRESTART, Group, Job, Task
from herder.objects import TaskEvent
from herder.plugins.hooks import Hooks, Participants
from herder.state import AllocStatus, StateError, Store, TaskRecord


class _Stage(enum.Enum):
    """Where a task stands in its group's lifecycle (Nomad's lifecycle stages)."""

    PRESTART = "prestart"
    PRESTART_SIDECAR = "prestart sidecar"
    MAIN = "main"
    POSTSTART = "poststart"
    POSTSTART_SIDECAR = "poststart sidecar"
    POSTSTOP = "poststop"


def _stage(task: Task) -> _Stage:
    lifecycle = task.lifecycle
    if lifecycle is None:
        return _Stage.MAIN
    if lifecycle.hook == PRESTART:
        return _Stage.PRESTART_SIDECAR if lifecycle.sidecar else _Stage.PRESTART
    if lifecycle.hook == POSTSTART:
        return _Stage.POSTSTART_SIDECAR if lifecycle.sidecar else _Stage.POSTSTART
    return _Stage.POSTSTOP


class _Phase(enum.IntEnum):
    PRESTART = 0
    MAIN = 1
    POSTSTART = 2
    WAIT = 3
    POSTSTOP = 4


_STARTS: dict[_Phase, frozenset[_Stage]] = {
    _Phase.PRESTART: frozenset({_Stage.PRESTART, _Stage.PRESTART_SIDECAR}),
    _Phase.MAIN: frozenset({_Stage.PRESTART_SIDECAR, _Stage.MAIN}),
    _Phase.POSTSTART: frozenset({_Stage.PRESTART_SIDECAR, _Stage.MAIN, _Stage.POSTSTART, _Stage.POSTSTART_SIDECAR}),
    _Phase.WAIT: frozenset({_Stage.PRESTART_SIDECAR, _Stage.MAIN, _Stage.POSTSTART_SIDECAR}),
    _Phase.POSTSTOP: frozenset({_Stage.POSTSTOP}),
}
"""The stages whose tasks may start in each phase (the gates Nomad's coordinator opens)."""


MAX_RUN_DURATION_EXCEEDED = "allocation exceeded max_run_duration"
"""What the ``Killing`` event of a task says when its group's ``max_run_duration`` has passed (Nomad's words)."""


def restarts_on_success(job_type: str, task: Task) -> bool:
    """Whether a task that exits 0 is restarted, as Nomad's restart tracker has it:
    in service and system jobs, except lifecycle tasks that are not sidecars
    (a prestart task that completes is done) and poststop tasks."""
    lifecycle = task.lifecycle
    if lifecycle is None:
        return job_type not in ("batch", "sysbatch")
    return lifecycle.sidecar and lifecycle.hook != POSTSTOP


@dataclass(frozen=True)
class EventRecord:
    """A task event with the allocation and task it belongs to."""

    alloc_id: str
    alloc_name: str
    task: str
    event: TaskEvent


class AllocRunner:
    """Runs the tasks of one placed allocation and records what happens to them.

    ``job_id`` names the job submission it comes from. ``restored`` holds
    the stored records of an allocation an earlier herder ran: running tasks
    are reattached, finished ones stay finished. ``on_done`` is called once
    every task is dead and cleaned up. ``max_kill_timeout`` caps every task's
    ``kill_timeout`` and ``shutdown_delay``. ``finished`` is the stored status
    of an allocation that finished under an earlier herder: the runner is then
    only its record (done, never started, nothing of it to stop).
    ``networks`` makes the namespace of a group whose network mode asks for one, before
    the first task starts, and removes it once every task is dead.
    """

    def __init__(self, placed: PlacedAlloc, job_id: str, hooks: Hooks, store: Store, *,
                 on_event: Callable[[EventRecord], None], on_done: Callable[[AllocRunner], None],
                 defer_cleanup: Callable[[str, str, Participants, float], None],
                 restored: Mapping[str, TaskRecord] | None = None, max_kill_timeout: float | None = None,
                 finished: AllocStatus | None = None, networks: AllocNetworks | None = None) -> None:
        self.placed = placed
        self.job_id = job_id
        self.alloc = placed.alloc
        self.job = placed.job
        self.group = placed.group
        self.hooks = hooks
        self.store = store
        self.restored = restored is not None
        self.networks = networks
        self.alloc_hooks = AllocHooks(self.alloc, prerun_done=self.restored)
        self._on_event = on_event
        self._on_done = on_done
        self._defer_cleanup = defer_cleanup
        self._tasks_dead = threading.Event()
        self._done = threading.Event()
        self._launched = False  # set once start() has started what it starts: from then on, the last task dead ends it
        self._stop_requested = threading.Event()
        self._lock = threading.Lock()
        self._coordinating = False  # set once the tasks may start: from then on, state changes move the phases
        self._phase = _Phase.PRESTART
        self._killing = False  # the tasks are being killed for a sibling's failure, a leader or the main tasks
        self._state_lost = False  # stopped because the state database could not be written
        self._cancel_deadline: Callable[[], None] | None = None  # the max_run_duration timer
        self._expired = False  # max_run_duration has passed: nothing starts any more
        self._max_kill_timeout = max_kill_timeout
        self.tasks = [self._task_runner(task, (restored or {}).get(task.task.name)) for task in placed.tasks]
        self._remaining = sum(not runner.done for runner in self.tasks)
        self._recorded = finished
        if finished is not None:
            self._launched = True
            self._tasks_dead.set()
            self._done.set()

    def _task_runner(self, placed: PlacedTask, record: TaskRecord | None) -> TaskRunner:
        task = placed.task
        tracker = RestartTracker(task.restart or self.group.restart,
                                 restart_on_success=restarts_on_success(self.job.type, task),
                                 count=record.restart_count if record else 0,
                                 window_start=record.restart_window_start if record else None)
        status = None
        if record is not None:
            status = TaskStatus(state=record.state, failed=record.failed, restarts=record.restarts,
                                exit_code=record.exit_code, handle_state=record.handle_state, created=record.created,
                                started_at=record.started_at, finished_at=record.finished_at)
            status.events = [event for _, event in self.store.events(self.alloc.id, task.name)]
        return TaskRunner(placed, self.hooks, tracker, on_event=self._forward, on_dead=self._task_dead,
                          persist=functools.partial(self._persist, task.name),
                          defer_cleanup=functools.partial(self._defer_cleanup, self.alloc.id, task.name),
                          status=status, recover=self._recover_state(record), max_kill_timeout=self._max_kill_timeout)

    def _persist(self, task: str, **changes: Any) -> None:
        """Store changed fields of a task's record.

        The write that records a started task's handle state is committed
        before its runner goes on: it is what makes a restarted herder find
        the task rather than start it again. The others are committed with
        the next group. A failed write never reaches the runner (see
        :func:`_written`).
        """
        durable = changes.get("handle_state") is not None
        _written(lambda: self.store.update_task(self.alloc.id, task, wait=durable, **changes))

    @staticmethod
    def _recover_state(record: TaskRecord | None) -> dict[str, object] | None:
        """What to reattach to: the handle state of a task that was running.
        A task that was between two runs (say, waiting out a restart delay) has
        none and starts again."""
        if record is None or record.state != "running":
            return None
        return record.handle_state or {}

    @property
    def ports(self) -> list[AllocatedPort]:
        """Every port of the allocation."""
        return self.placed.all_ports

    @property
    def stopping(self) -> bool:
        """Whether the allocation's tasks are being stopped for good (not one task restarting)."""
        return self._stop_requested.is_set() or self._killing

    @property
    def stop_requested(self) -> bool:
        """Whether the allocation was asked to stop (its desired status is ``stop``): a failed one is
        not rescheduled then."""
        return self._stop_requested.is_set()

    @property
    def expired(self) -> bool:
        """Whether the group's ``max_run_duration`` passed and the tasks were killed for it (in this
        herder's life: not kept across restarts)."""
        return self._expired

    @property
    def failed(self) -> bool:
        return self._state_lost or any(t.status.failed for t in self.tasks)

    @property
    def status(self) -> str:
        """``pending``, ``running``, then ``complete``, ``failed`` or ``stopped``."""
        if not self._tasks_dead.is_set():
            return "running" if any(t.status.state != "pending" for t in self.tasks) else "pending"
        return self._final_status()

    def _final_status(self) -> str:
        if self._recorded is not None:
            return self._recorded
        if self.failed:
            return "failed"
        return "stopped" if self._stop_requested.is_set() else "complete"

    # -- running -----------------------------------------------------------

    def _forward(self, runner: TaskRunner, event: TaskEvent) -> None:
        _written(lambda: self.store.add_event(self.alloc.id, runner.name, event, wait=False))
        self._on_event(EventRecord(self.alloc.id, self.alloc.name, runner.name, event))
        if event.type in (events.STARTED, events.REATTACHED):  # a task now running may open the next phase
            self._update()

    def start(self) -> None:
        """Start the tasks in their lifecycle order (returns at once; :meth:`wait` tells
        when all are dead and cleaned up)."""
        _written(lambda: self.store.update_alloc(self.alloc.id, status="running", wait=False))
        try:
            self._join_network()
        except Exception as exc:
            message = f"the allocation's network cannot be set up: {exc}"
            if self.restored:  # its tasks may run: they are killed before it ends
                self.fail_restore(message)
                return
            for runner in self.tasks:
                runner.fail_setup(message)
            self._finish()
            return
        if not self.restored:
            try:
                self.alloc_hooks.prerun(self.hooks)
            except Exception as exc:
                message = self.hooks.describe_failure("herder_alloc_prerun", exc)
                for runner in self.tasks:
                    runner.fail_setup(message)
                self._finish()
                return
            for runner in self.tasks:
                runner.emit(events.RECEIVED, "Task received by client")
        if self._stop_requested.is_set():  # stopped before it ran: nothing starts, poststop tasks neither
            for runner in self.tasks:
                runner.request_kill()
        else:
            # Tasks an earlier herder left running are reattached whatever the phase.
            for runner in self.tasks:
                if runner.status.state == "running" and not runner.done:
                    runner.start()
            with self._lock:
                self._coordinating = True
            self._arm_deadline()
            self._update()
        with self._lock:
            self._launched = True
            finished = self._remaining == 0
        if finished:
            self._finish()

    def _join_network(self) -> None:
        """Give the allocation its namespace (a restored one its namespace again), and its tasks
        the namespace and the port variables of a task inside it."""
        network = self.group.network
        if not network.isolated or self.networks is None:
            return
        if all(runner.done for runner in self.tasks):  # restored with nothing left to run: it only ends
            return
        first = self.placed.tasks[0]
        hostname = str(interpolate(network.hostname, first.make_lookup(dict(first.ctx.env))))
        joined = self.networks.attach(self.alloc, network, self.placed.all_ports, hostname)
        self.alloc.network = joined
        for runner in self.tasks:
            runner.join_network(joined, isolated_port_environment(runner.ctx.ports, joined))

    def _leave_network(self) -> None:
        """Remove the allocation's namespace, its tasks all dead; a failure is told to each task."""
        if self.networks is None or not self.group.network.isolated:
            return
        try:
            self.networks.detach(self.alloc)
        except Exception as exc:
            for runner in self.tasks:
                runner.emit(events.TASK_HOOK_FAILED, f"the allocation's network was not removed: {exc}")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every task is dead and cleaned up; False on timeout."""
        return self._done.wait(timeout)

    def _task_dead(self, runner: TaskRunner) -> None:
        """Count a task finished for good, and react to it; the last one ends the allocation."""
        self._update()
        with self._lock:
            self._remaining -= 1
            finished = self._remaining == 0 and self._launched
        if finished:
            self._finish()

    def _update(self) -> None:
        """React to the tasks' states as Nomad's alloc runner does: kill the others
        when a task failed, the leader died or only sidecars are left; then move
        through the phases and start the tasks whose turn has come."""
        with self._lock:
            if not self._coordinating:
                return
            reason = None if self._killing else self._kill_reason()
            if reason is not None:
                self._killing = True
            while (following := self._next_phase()) is not self._phase:
                self._phase = following
            allowed = _STARTS[self._phase]
            due = [runner for runner in self.tasks if _stage(runner.task) in allowed and not runner.started
                   and not runner.done and not self._expired]
        if reason is not None:
            self._kill_in_order([runner for runner in self.tasks if _stage(runner.task) is not _Stage.POSTSTOP],
                                reason)
        for runner in due:
            runner.start()

    def _arm_deadline(self) -> None:
        """Have the tasks killed once the group's ``max_run_duration`` has passed since the allocation
        was created (at once if it has)."""
        limit = self.group.max_run_duration
        if not limit:
            return
        try:
            record = self.store.alloc(self.alloc.id)
        except StateError:
            record = None
        created = record.created_at if record is not None else time.time()
        runtime = shared_runtime()
        self._cancel_deadline = runtime.timer.call_later(created + limit - time.time(),
                                                         lambda: runtime.pool.submit(self._expire))

    def _expire(self) -> None:
        """Kill every task for ``max_run_duration``, poststop tasks that have not started included (they
        never start then); the allocation completes, and is neither restarted nor replaced."""
        with self._lock:
            if self._tasks_dead.is_set() or self._stop_requested.is_set():
                return
            self._killing = self._expired = True
        self._kill_in_order(list(self.tasks), None, message=MAX_RUN_DURATION_EXCEEDED)

    def _kill_reason(self) -> TaskEvent | None:
        """Why the tasks still alive (poststop tasks aside) must be killed, if they must."""
        others = [runner for runner in self.tasks if _stage(runner.task) is not _Stage.POSTSTOP]
        live = [runner for runner in others if runner.status.state != "dead"]
        if not live:
            return None
        reason: TaskEvent | None = None
        for runner in others:
            if runner.status.state != "dead":
                continue
            if runner.status.failed:
                if reason is None:  # a dead leader comes first
                    reason = TaskEvent(events.SIBLING_TASK_FAILED, f"Task's sibling {runner.name!r} failed",
                                       {"failed_sibling": runner.name})
            elif runner.task.leader:
                reason = TaskEvent(events.LEADER_TASK_DEAD, "Leader Task in Group dead")
        if reason is None and all(runner.task.is_sidecar for runner in live):
            reason = TaskEvent(events.MAIN_TASKS_DEAD, "Main tasks in the group died")
        return reason

    def _next_phase(self) -> _Phase:
        """The phase that follows the current one given the tasks' states (or the current one)."""
        def of(*stages: _Stage) -> list[TaskRunner]:
            return [runner for runner in self.tasks if _stage(runner.task) in stages]

        if all(runner.status.state == "dead" for runner in self.tasks if _stage(runner.task) is not _Stage.POSTSTOP):
            return _Phase.POSTSTOP
        phase = self._phase
        if phase is _Phase.PRESTART:
            ready = (all(r.status.state == "dead" and not r.status.failed for r in of(_Stage.PRESTART))
                     and all(r.status.state == "running" for r in of(_Stage.PRESTART_SIDECAR)))
            return _Phase.MAIN if ready else phase
        if phase is _Phase.MAIN:
            return _Phase.POSTSTART if all(r.status.state != "pending" for r in of(_Stage.MAIN)) else phase
        if phase is _Phase.POSTSTART:
            return _Phase.WAIT if all(r.status.state == "dead" for r in of(_Stage.POSTSTART)) else phase
        return phase

    @staticmethod
    def _kill_in_order(runners: list[TaskRunner], reason: TaskEvent | None, *, message: str = "") -> None:
        """Kill ``runners`` in Nomad's order: the leader, then the other tasks
        together, the sidecars last (returns at once); ``message``: what their ``Killing`` says."""
        leader = [runner for runner in runners if runner.task.leader]
        sidecars = [runner for runner in runners if runner.task.is_sidecar and not runner.task.leader]
        rest = [runner for runner in runners if runner not in leader and runner not in sidecars]
        _kill_waves(iter((leader, rest, sidecars)), reason, message)

    def stop(self) -> None:
        """Kill the tasks gracefully, in Nomad's order (returns at once; :meth:`wait`
        tells when all are dead).

        Poststop tasks that have not started yet still run once the others are
        dead, as when Nomad stops a job; one that has started is killed, so a
        second stop ends an allocation that is in its poststop phase.
        """
        if self._done.is_set():
            return
        self._stop_requested.set()
        _written(lambda: self.store.update_alloc(self.alloc.id, desired="stop", wait=False))
        with self._lock:
            runners = [runner for runner in self.tasks
                       if _stage(runner.task) is not _Stage.POSTSTOP or runner.started]
        self._kill_in_order(runners, None)

    def take_version(self, job: Job, group: Group, job_id: str) -> None:
        """Become an allocation of submission ``job_id`` of its job, updated in place: the
        caller knows that nothing its tasks run with changed (:mod:`herder.jobspec.update_kind`).
        What is read around them from now on (services, checks, the group's update block) is
        the new version's; the tasks run on as they were started."""
        tasks = {task.name: task for task in group.tasks}
        for placed in self.placed.tasks:
            placed.task = tasks[placed.task.name]
        self.alloc.tasks = list(group.tasks)
        self.placed.job, self.placed.group = job, group
        self.job, self.group, self.job_id = job, group, job_id
        _written(lambda: self.store.update_alloc(self.alloc.id, job_id=job_id))

    def state_failed(self, message: str, *, stop: bool) -> None:
        """The state database cannot be written (``message`` says why): tell
        every task that is not dead; with ``stop``, stop them too, and the
        allocation fails."""
        if self._tasks_dead.is_set():
            return
        for runner in self.tasks:
            if not runner.done:
                runner.emit(events.STATE_WRITE_FAILED, message)
        if stop:
            self._state_lost = True
            self.stop()

    def fail_restore(self, message: str) -> None:
        """Fail an allocation an earlier herder ran that cannot be set up again
        (``message`` says why); returns once none of its tasks runs.

        Its tasks still running are killed and cleaned up together (see
        :meth:`TaskRunner.fail_setup`): nothing of it runs beside the
        allocation that may replace it.
        """
        self._stop_requested.set()
        for runner in self.tasks:
            if not runner.done:
                runner.fail_setup(message)
        for runner in self.tasks:
            runner.wait()
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self._tasks_dead.is_set():
                return
            self._tasks_dead.set()
        if self._cancel_deadline is not None:
            self._cancel_deadline()
        try:
            self.alloc_hooks.postrun(self.hooks)
        except Exception as exc:
            for runner in self.tasks:
                runner.emit(events.TASK_HOOK_FAILED, self.hooks.describe_failure("herder_alloc_postrun", exc))
        self._leave_network()
        _written(lambda: self.store.update_alloc(self.alloc.id, status=self._final_status(), wait=False))
        self._on_done(self)
        self._done.set()


def _kill_waves(waves: Iterator[list[TaskRunner]], reason: TaskEvent | None, message: str = "") -> None:
    """Kill the tasks of the first wave of ``waves`` that has a live one, together; once all of
    them are dead, the next wave (returns at once)."""
    live = next((alive for wave in waves if (alive := [runner for runner in wave if not runner.done])), None)
    if live is None:
        return
    left = len(live)
    lock = threading.Lock()

    def dead() -> None:
        nonlocal left
        with lock:
            left -= 1
            last = left == 0
        if last:
            _kill_waves(waves, reason, message)

    for runner in live:
        runner.request_kill(reason, message=message)
    for runner in live:
        runner.when_done(dead)


def _written(write: Callable[[], None]) -> None:
    """Make a state write that may fail: the runners go on to their end
    whatever the state database does. The store tells the client that its
    commits fail (see :class:`herder.state.Store`); what was not written is
    kept for the next commit."""
    with contextlib.suppress(StateError):
        write()
