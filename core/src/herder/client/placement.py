"""Placement: what an allocation takes on this host before its tasks run.

Placing an allocation creates its directories, takes its ports and the cores
its tasks reserve (:mod:`herder.client.cores`), prepares its tasks' log sinks
and builds each task's environment and context. It is a step of its own:
:meth:`Placement.release` undoes it, and :meth:`Placement.restore` does it
again from stored state when herder starts over, with the same directories,
ports, cores and log files.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from herder import events
from herder.client.config import HostVolumeConfig
from herder.client.cores import CORES, CoreAllocator, cpuset, parse_cpuset
from herder.client.env import task_environment
from herder.client.logs import TaskLogs
from herder.client.node import Node
from herder.client.ports import PortAllocator
from herder.client.taskdir import (
    alloc_dir_path,
    build_alloc_dir,
    build_task_dir,
    task_dir_paths,
    task_owner,
)
from herder.client.volumes import task_mounts
from herder.context import AllocatedPort, CreatedResources, HostMount, TaskContext
from herder.jobspec import task_lookup
from herder.model import Group, Job, Task
from herder.objects import Alloc
from herder.sdk.env import set_var
from herder.supervisor.pump import Dropped

Lookup = Callable[[str], "str | None"]

GROUP_PORTS = ""
"""The owner of a group network's ports, shared by every task of the allocation."""


@dataclass
class PlacedTask:
    """One task of a placed allocation: its context and how to interpolate it."""

    task: Task
    ctx: TaskContext
    logs: TaskLogs
    make_lookup: Callable[[dict[str, str]], Lookup]


@dataclass
class PlacedAlloc:
    """An allocation with everything it holds on this host."""

    alloc: Alloc
    job: Job
    group: Group
    ports: dict[str, list[AllocatedPort]]
    """Allocated ports by owner: a task's name, or :data:`GROUP_PORTS`."""
    tasks: list[PlacedTask]

    @property
    def all_ports(self) -> list[AllocatedPort]:
        return [port for ports in self.ports.values() for port in ports]


class Placement:
    """Places allocations in a data dir, with ports and cores from their allocators and the node's host volumes."""

    def __init__(self, data_dir: Path, ports: PortAllocator, supervisor: object = None,
                 host_volumes: Mapping[str, HostVolumeConfig] | None = None,
                 cores: CoreAllocator | None = None) -> None:
        self.data_dir = data_dir
        self.port_allocator = ports
        self.supervisor = supervisor
        self.host_volumes = dict(host_volumes or {})
        self.cores = cores or CoreAllocator()

    def place(self, job: Job, group: Group, index: int, node: Node) -> PlacedAlloc:
        """A new allocation of ``group`` with fresh ports.

        :raises PlacementError: a static port is taken or reserved, no dynamic port is free, a host
            volume cannot be had, or the node has not the cores a task asks for.
        """
        alloc_id = str(uuid.uuid4())
        try:
            ports = {GROUP_PORTS: self.port_allocator.allocate(alloc_id, group.ports)}
            for task in group.tasks:
                ports[task.name] = self.port_allocator.allocate(alloc_id, task.resources.ports)
            cores = self.cores.allocate(alloc_id, {task.name: task.resources.cores for task in group.tasks})
            created = {task: [(CORES, cpuset(given))] for task, given in cores.items()}
            return self._build(job, group, alloc_id, index, node, ports, created, mount=True)
        except BaseException:
            self.port_allocator.release(alloc_id)
            self.cores.release(alloc_id)
            raise

    def restore(self, job: Job, group: Group, alloc_id: str, index: int, node: Node,
                ports: Mapping[str, Sequence[AllocatedPort]],
                created: Mapping[str, Sequence[tuple[str, str]]]) -> PlacedAlloc:
        """An allocation placed by an earlier herder, from its stored ports and
        each task's created resources.

        :raises PlacementError: one of its ports is held by another allocation, or a host volume
            cannot be had.
        """
        self.port_allocator.reserve_existing(alloc_id, [p for owned in ports.values() for p in owned])
        self.cores.reserve_existing(alloc_id, {task: cores for task, items in created.items()
                                               if (cores := _reserved(items))})
        owned = {owner: list(owned) for owner, owned in ports.items()}
        return self._build(job, group, alloc_id, index, node, owned, created, mount=True)

    def rebuild(self, job: Job, group: Group, alloc_id: str, index: int, node: Node,
                created: Mapping[str, Sequence[tuple[str, str]]]) -> PlacedAlloc:
        """The contexts of a finished allocation's tasks, holding no port: for
        cleanup steps that finish after the allocation is done."""
        return self._build(job, group, alloc_id, index, node, {}, created)

    def teardown(self, job: Job, group: Group, alloc_id: str, index: int, node: Node,
                 created: Mapping[str, Sequence[tuple[str, str]]]) -> PlacedAlloc:
        """The contexts of an allocation whose tasks are not to run again: one that cannot be
        restored, to stop what of it still runs, or a finished one, kept as its record.

        They hold no port and create or check no directory: the directories
        are only named (a task may have left links where they were, which is
        why the allocation cannot be restored; what writes or reads there
        opens them safely)."""
        return self._build(job, group, alloc_id, index, node, {}, created, make_dirs=False)

    def release(self, placed: PlacedAlloc) -> None:
        """Give back what placement took: log sinks, ports and cores (the directories stay, with the logs)."""
        for task in placed.tasks:
            task.logs.close()
        self.port_allocator.release(placed.alloc.id)
        self.cores.release(placed.alloc.id)

    def _build(self, job: Job, group: Group, alloc_id: str, index: int, node: Node,
               ports: dict[str, list[AllocatedPort]],
               created: Mapping[str, Sequence[tuple[str, str]]], *, make_dirs: bool = True,
               mount: bool = False) -> PlacedAlloc:
        """``mount``: the tasks are to run, with their host volumes prepared (else they mount none)."""
        mounts = {task.name: task_mounts(group, task, index, self.host_volumes) if mount else []
                  for task in group.tasks}
        alloc_dir = build_alloc_dir(self.data_dir, alloc_id) if make_dirs else alloc_dir_path(self.data_dir, alloc_id)
        alloc = Alloc(id=alloc_id, name=f"{job.name}.{group.name}[{index}]", index=index, job_name=job.name,
                      group_name=group.name, dir=alloc_dir, tasks=list(group.tasks))
        placed = PlacedAlloc(alloc=alloc, job=job, group=group, ports=ports, tasks=[])
        for task in group.tasks:
            task_ports = ports.get(GROUP_PORTS, []) + ports.get(task.name, [])
            placed.tasks.append(self._task(placed, task, task_ports, node, created.get(task.name, ()), make_dirs,
                                           mounts[task.name]))
        return placed

    def _task(self, placed: PlacedAlloc, task: Task, ports: list[AllocatedPort], node: Node,
              created: Sequence[tuple[str, str]], make_dirs: bool, mounts: list[HostMount]) -> PlacedTask:
        alloc = placed.alloc
        if make_dirs:
            task_dir = build_task_dir(alloc.dir, task.name, task_owner(task.user))
        else:
            task_dir = task_dir_paths(alloc.dir, task.name)

        def report_unsafe(message: str) -> None:
            ctx.emit_event(events.UNSAFE_LOG_FILE, message)  # ctx is made below, before any output is written

        def report_dropped(dropped: Dropped) -> None:
            ctx.emit_event(events.LOGS_DROPPED, dropped.message, **dropped.details())

        logs = TaskLogs.open(task_dir.logs_dir, task.name, task.logs, on_unsafe=report_unsafe,
                             on_dropped=report_dropped)
        env = task_environment(job=placed.job, group=placed.group, task=task, alloc_id=alloc.id,
                               alloc_index=alloc.index, task_dir=task_dir, ports=ports, datacenter=node.datacenter)
        cores = _reserved(created)
        if cores:
            set_var(env, "CPU_CORES", cpuset(cores))
        ctx = TaskContext(
            alloc_id=alloc.id, alloc_name=alloc.name, alloc_index=alloc.index, job_name=placed.job.name,
            group_name=placed.group.name, task_name=task.name, env=env, task_dir=task_dir, ports=ports,
            stdout=logs.stdout, stderr=logs.stderr, created=CreatedResources(list(created)),
            logger=logging.getLogger(f"herder.task.{task.name}"), supervisor=self.supervisor, mounts=mounts,
            cores=cores,
        )
        meta = {**placed.job.meta, **placed.group.meta, **task.meta}

        def make_lookup(env: dict[str, str]) -> Lookup:
            return task_lookup(env, node.target, meta)

        return PlacedTask(task=task, ctx=ctx, logs=logs, make_lookup=make_lookup)


def _reserved(created: Sequence[tuple[str, str]]) -> tuple[int, ...]:
    """The cores a task's created resources say it holds (none for a value that is not a cpuset list)."""
    for kind, value in created:
        if kind == CORES:
            try:
                return parse_cpuset(value)
            except ValueError:
                return ()
    return ()
