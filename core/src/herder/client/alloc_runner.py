"""The allocation runner: the tasks of one placed group instance, side by side."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from herder import events
from herder.client.placement import PlacedAlloc, PlacedTask
from herder.client.restarts import RestartTracker
from herder.client.task_runner import TaskRunner, TaskState
from herder.context import AllocatedPort
from herder.objects import TaskEvent
from herder.plugins.hooks import Hooks, Phase
from herder.state import Store, TaskRecord


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
    every task is dead and cleaned up.
    """

    def __init__(self, placed: PlacedAlloc, job_id: str, hooks: Hooks, store: Store, *,
                 on_event: Callable[[EventRecord], None], on_done: Callable[[AllocRunner], None],
                 defer_cleanup: Callable[[str, str, Phase, float], None],
                 restored: Mapping[str, TaskRecord] | None = None) -> None:
        self.placed = placed
        self.job_id = job_id
        self.alloc = placed.alloc
        self.job = placed.job
        self.group = placed.group
        self.hooks = hooks
        self.store = store
        self.restored = restored is not None
        self._on_event = on_event
        self._on_done = on_done
        self._defer_cleanup = defer_cleanup
        self._tasks_dead = threading.Event()
        self._done = threading.Event()
        self._stop_requested = threading.Event()
        self._lock = threading.Lock()
        self.tasks = [self._task_runner(task, (restored or {}).get(task.task.name)) for task in placed.tasks]
        self._remaining = sum(not runner.done for runner in self.tasks)

    def _task_runner(self, placed: PlacedTask, record: TaskRecord | None) -> TaskRunner:
        task = placed.task
        tracker = RestartTracker(task.restart or self.group.restart, restart_on_success=self.job.type == "service",
                                 count=record.restart_count if record else 0,
                                 window_start=record.restart_window_start if record else None)
        status = None
        if record is not None:
            status = TaskState(state=record.state, failed=record.failed, restarts=record.restarts,
                               exit_code=record.exit_code, handle_state=record.handle_state)
            status.events = [event for _, event in self.store.events(self.alloc.id, task.name)]
        return TaskRunner(placed, self.hooks, tracker, on_event=self._forward, on_dead=self._task_dead,
                          persist=functools.partial(self.store.update_task, self.alloc.id, task.name),
                          defer_cleanup=functools.partial(self._defer_cleanup, self.alloc.id, task.name),
                          status=status, recover=self._recover_state(record))

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
    def failed(self) -> bool:
        return any(t.status.failed for t in self.tasks)

    @property
    def status(self) -> str:
        """``pending``, ``running``, then ``complete``, ``failed`` or ``stopped``."""
        if not self._tasks_dead.is_set():
            return "running" if any(t.status.state != "pending" for t in self.tasks) else "pending"
        return self._final_status()

    def _final_status(self) -> str:
        if self.failed:
            return "failed"
        return "stopped" if self._stop_requested.is_set() else "complete"

    # -- running -----------------------------------------------------------

    def _forward(self, runner: TaskRunner, event: TaskEvent) -> None:
        self.store.add_event(self.alloc.id, runner.name, event)
        self._on_event(EventRecord(self.alloc.id, self.alloc.name, runner.name, event))

    def run(self) -> None:
        """Start every task in parallel and return when all are dead and cleaned up."""
        self.store.update_alloc(self.alloc.id, status="running")
        if not self.restored:
            try:
                self.hooks.alloc_prerun(self.alloc)
            except Exception as exc:
                message = self.hooks.describe_failure("herder_alloc_prerun", exc)
                for runner in self.tasks:
                    runner.fail_setup(message)
                self._finish()
                return
            for runner in self.tasks:
                runner.emit(events.RECEIVED, "Task received by client")
        if self._stop_requested.is_set():  # stopped before it ran: nothing starts
            self._kill_all(None)
        for runner in self.tasks:
            if not runner.done:
                runner.start()
        if self._remaining:
            self._tasks_dead.wait()
        self._finish()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every task is dead and cleaned up; False on timeout."""
        return self._done.wait(timeout)

    def _task_dead(self, runner: TaskRunner) -> None:
        """React to a task finished for good: a failure or a dead leader stops the others."""
        reason: TaskEvent | None = None
        if runner.status.failed:
            reason = TaskEvent(events.SIBLING_TASK_FAILED, f"Task's sibling {runner.name!r} failed",
                               {"failed_sibling": runner.name})
        elif runner.task.leader:
            reason = TaskEvent(events.LEADER_TASK_DEAD, "Leader Task in Group dead")
        if reason is not None:
            self._kill_all(reason, exclude=runner)
        with self._lock:
            self._remaining -= 1
            if self._remaining == 0:
                self._tasks_dead.set()

    def _kill_all(self, reason: TaskEvent | None, exclude: TaskRunner | None = None) -> None:
        """Kill the other tasks in parallel, without waiting (called from task threads)."""
        for other in self.tasks:
            if other is not exclude and not other.done:
                threading.Thread(target=other.kill, args=(reason,), daemon=True).start()

    def stop(self) -> None:
        """Kill every task gracefully (returns at once; ``run`` returns when all are dead)."""
        if self._done.is_set():
            return
        self._stop_requested.set()
        self.store.update_alloc(self.alloc.id, desired="stop")
        self._kill_all(None)

    def _finish(self) -> None:
        self._tasks_dead.set()
        try:
            self.hooks.alloc_postrun(self.alloc)
        except Exception as exc:
            for runner in self.tasks:
                runner.emit(events.TASK_HOOK_FAILED, self.hooks.describe_failure("herder_alloc_postrun", exc))
        self.store.update_alloc(self.alloc.id, status=self._final_status())
        self._on_done(self)
        self._done.set()
