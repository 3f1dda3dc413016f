"""The allocation runner: the tasks of one group instance, side by side."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from herder.client.env import task_environment
from herder.client.logs import TaskLogs
from herder.client.node import Node
from herder.client.ports import PortAllocator
from herder.client.restarts import RestartTracker
from herder.client.task_runner import Lookup, TaskRunner
from herder.client.taskdir import build_alloc_dir, build_task_dir
from herder.context import AllocatedPort, TaskContext
from herder.jobspec import task_lookup
from herder.model import Group, Job, Task
from herder.objects import Alloc, TaskEvent
from herder.plugins.hooks import HOOK_FAILED, Hooks


@dataclass(frozen=True)
class EventRecord:
    """A task event with the allocation and task it belongs to."""

    alloc_id: str
    alloc_name: str
    task: str
    event: TaskEvent


class AllocRunner:
    """Places one allocation (directories, ports, log sinks) and runs its tasks.

    Placement happens in the constructor, so a taken static port fails before
    any task of any allocation starts.
    """

    def __init__(self, *, alloc_id: str, index: int, job: Job, group: Group, hooks: Hooks,
                 data_dir: Path, ports: PortAllocator, node: Node,
                 on_event: Callable[[EventRecord], None]) -> None:
        self.job = job
        self.group = group
        self.hooks = hooks
        self._port_allocator = ports
        self._on_event = on_event
        self.alloc = Alloc(id=alloc_id, name=f"{job.name}.{group.name}[{index}]", index=index,
                           job_name=job.name, group_name=group.name,
                           dir=build_alloc_dir(data_dir, alloc_id), tasks=list(group.tasks))
        self._logs: list[TaskLogs] = []
        self.tasks: list[TaskRunner] = []
        self._done = threading.Event()
        self._remaining = len(group.tasks)
        self._lock = threading.Lock()
        try:
            shared_ports = self._port_allocator.allocate(alloc_id, group.ports)
            for task in group.tasks:
                self.tasks.append(self._task_runner(task, node, shared_ports))
        except BaseException:
            self.discard()
            raise

    def _task_runner(self, task: Task, node: Node, shared_ports: list[AllocatedPort]) -> TaskRunner:
        ports = shared_ports + self._port_allocator.allocate(self.alloc.id, task.resources.ports)
        task_dir = build_task_dir(self.alloc.dir, task.name)
        logs = TaskLogs.open(task_dir.logs_dir, task.name, task.logs)
        self._logs.append(logs)
        env = task_environment(job=self.job, group=self.group, task=task, alloc_id=self.alloc.id,
                               alloc_index=self.alloc.index, task_dir=task_dir, ports=ports,
                               datacenter=node.datacenter)
        ctx = TaskContext(
            alloc_id=self.alloc.id, alloc_name=self.alloc.name, alloc_index=self.alloc.index,
            job_name=self.job.name, group_name=self.group.name, task_name=task.name, env=env,
            task_dir=task_dir, ports=list(ports), stdout=logs.stdout, stderr=logs.stderr,
            logger=logging.getLogger(f"herder.task.{task.name}"),
        )
        tracker = RestartTracker(task.restart or self.group.restart, restart_on_success=self.job.type == "service")
        meta = {**self.job.meta, **self.group.meta, **task.meta}

        def make_lookup(env: dict[str, str]) -> Lookup:
            return task_lookup(env, node.attributes, node.name, node.datacenter, meta)

        return TaskRunner(task, ctx, self.hooks, tracker, make_lookup, self._forward, self._task_dead)

    @property
    def ports(self) -> list[AllocatedPort]:
        """Every port of the allocation, once."""
        return list({(p.label, p.value): p for t in self.tasks for p in t.ctx.ports}.values())

    # -- running -----------------------------------------------------------

    def _forward(self, runner: TaskRunner, event: TaskEvent) -> None:
        self._on_event(EventRecord(self.alloc.id, self.alloc.name, runner.name, event))

    def run(self) -> None:
        """Start every task in parallel and return when all are dead and cleaned up."""
        try:
            self.hooks.alloc_prerun(self.alloc)
        except Exception as exc:
            message = self.hooks.describe_failure("herder_alloc_prerun", exc)
            for runner in self.tasks:
                runner.fail_setup(message)
            self._finish()
            return
        for runner in self.tasks:
            runner.emit("Received", "Task received by client")
        for runner in self.tasks:
            runner.start()
        self._done.wait()
        self._finish()

    def _task_dead(self, runner: TaskRunner) -> None:
        """React to a task finished for good: a failure or a dead leader stops the others."""
        reason: TaskEvent | None = None
        if runner.status.failed:
            reason = TaskEvent("Sibling Task Failed", f"Task's sibling {runner.name!r} failed",
                               {"failed_sibling": runner.name})
        elif runner.task.leader:
            reason = TaskEvent("Leader Task Dead", "Leader Task in Group dead")
        if reason is not None:
            self._kill_all(reason, exclude=runner)
        with self._lock:
            self._remaining -= 1
            if self._remaining == 0:
                self._done.set()

    def _kill_all(self, reason: TaskEvent | None, exclude: TaskRunner | None = None) -> None:
        """Kill the other tasks in parallel, without waiting (called from task threads)."""
        for other in self.tasks:
            if other is not exclude:
                threading.Thread(target=other.kill, args=(reason,), daemon=True).start()

    def stop(self) -> None:
        """Kill every task gracefully (returns at once; ``run`` returns when all are dead)."""
        self._kill_all(None)

    def _finish(self) -> None:
        self.discard()
        try:
            self.hooks.alloc_postrun(self.alloc)
        except Exception as exc:
            for runner in self.tasks:
                runner.emit(HOOK_FAILED, self.hooks.describe_failure("herder_alloc_postrun", exc))

    def discard(self) -> None:
        """Release what placement took: log sinks and ports."""
        for logs in self._logs:
            logs.close()
        self._port_allocator.release(self.alloc.id)

    @property
    def failed(self) -> bool:
        return any(t.status.failed for t in self.tasks)
