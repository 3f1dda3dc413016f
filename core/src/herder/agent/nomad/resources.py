"""An allocation's resources in Nomad's API shapes: what it was given (each task's CPU and memory,
its ports and networks, its disk) and what its tasks use."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from herder.agent.nomad import models
from herder.client.alloc_runner import AllocRunner
from herder.client.placement import GROUP_PORTS
from herder.context import AllocatedPort
from herder.model import PortSpec, Task
from herder.objects import TaskStats

DEFAULT_DISK_MB = 300
"""Nomad's ``ephemeral_disk`` size when the job says none."""


def allocated(alloc: AllocRunner, job: dict[str, Any]) -> dict[str, Any]:
    """What ``alloc`` was given, in the fields of Nomad's allocation: ``AllocatedResources`` (each task's
    CPU and memory, the group's ports and disk: "Allocation Addresses" of ``alloc status``), and the
    older ``Resources``, ``TaskResources`` and ``SharedResources`` ("Task Resources", which Nomad 1.1's
    ``alloc status`` reads, with the usage of ``-stats``). The disk is the job's ``ephemeral_disk``
    (herder does not limit it), Nomad's 300 MB by default."""
    groups = [g for g in job.get("TaskGroups") or [] if isinstance(g, dict) and g.get("Name") == alloc.group.name]
    group = groups[0] if groups else {}
    disk = (group.get("EphemeralDisk") or {}).get("SizeMB") or DEFAULT_DISK_MB
    shared_ports = alloc.placed.ports.get(GROUP_PORTS, [])
    shared = [_network(shared_ports, alloc.group.ports)] if shared_ports else None
    tasks: dict[str, models.AllocatedTaskResources] = {}
    task_resources: dict[str, models.Resources] = {}
    for runner in alloc.tasks:
        asked = runner.task.resources
        own = alloc.placed.ports.get(runner.name, [])
        networks = [_network(own, asked.ports)] if own else None
        tasks[runner.name] = models.AllocatedTaskResources(
            Cpu=models.AllocatedCpuResources(CpuShares=asked.cpu, ReservedCores=list(runner.ctx.cores) or None),
            Memory=models.AllocatedMemoryResources(MemoryMB=asked.memory, MemoryMaxMB=max(0, asked.memory_max)),
            Networks=networks)
        task_resources[runner.name] = models.Resources(CPU=asked.cpu, Cores=asked.cores, MemoryMB=asked.memory,
                                                       MemoryMaxMB=max(0, asked.memory_max), Networks=networks)
    ports = [models.AllocatedPortMapping(Label=p.label, Value=p.value, To=p.to or 0, HostIP=p.host_ip)
             for p in shared_ports]
    return {
        "AllocatedResources": models.AllocatedResources(
            Tasks=tasks, TaskLifecycles={runner.name: _lifecycle(runner.task) for runner in alloc.tasks},
            Shared=models.AllocatedSharedResources(Networks=shared, DiskMB=disk, Ports=ports or None)),
        "TaskResources": task_resources,
        "SharedResources": models.Resources(DiskMB=disk, Networks=shared),
        "Resources": models.Resources(CPU=sum(r.CPU for r in task_resources.values()),
                                      MemoryMB=sum(r.MemoryMB for r in task_resources.values()),
                                      DiskMB=disk, Networks=shared),
    }


def usage(sampled: Mapping[str, TaskStats | None], mhz: float) -> models.AllocResourceUsage:
    """The allocation's tasks' resource usage (what a driver cannot tell is 0), and their sum; ``mhz``
    is one core's speed."""
    now = time.time_ns()
    tasks = {name: models.TaskResourceUsage(ResourceUsage=_usage(stats, mhz), Timestamp=now)
             for name, stats in sampled.items()}
    total = models.ResourceUsage()
    for task in tasks.values():
        total.MemoryStats.RSS += task.ResourceUsage.MemoryStats.RSS
        total.MemoryStats.Usage += task.ResourceUsage.MemoryStats.Usage
        total.CpuStats.TotalTicks += task.ResourceUsage.CpuStats.TotalTicks
        total.CpuStats.Percent += task.ResourceUsage.CpuStats.Percent
    return models.AllocResourceUsage(ResourceUsage=total, Tasks=tasks, Timestamp=now)


def _network(ports: list[AllocatedPort], asked: tuple[PortSpec, ...]) -> models.NetworkResource:
    """Allocated ``ports`` as Nomad's network: the ones asked for by number reserved, the others dynamic."""
    static = {spec.label for spec in asked if spec.static is not None}
    reserved = [models.Port(Label=p.label, Value=p.value, To=p.to or 0) for p in ports if p.label in static]
    dynamic = [models.Port(Label=p.label, Value=p.value, To=p.to or 0) for p in ports if p.label not in static]
    return models.NetworkResource(IP=ports[0].host_ip, ReservedPorts=reserved or None, DynamicPorts=dynamic or None)


def _lifecycle(task: Task) -> dict[str, Any] | None:
    lifecycle = task.lifecycle
    return None if lifecycle is None else {"Hook": lifecycle.hook, "Sidecar": lifecycle.sidecar}


def _usage(stats: TaskStats | None, mhz: float) -> models.ResourceUsage:
    """A task's usage as Nomad's; ``mhz`` is one core's speed."""
    if stats is None:
        return models.ResourceUsage()
    measured = [name for name, value in (("RSS", stats.memory_rss_bytes), ("Usage", stats.memory_usage_bytes))
                if value is not None]
    return models.ResourceUsage(
        MemoryStats=models.MemoryStats(RSS=stats.memory_rss_bytes or 0, Usage=stats.memory_usage_bytes or 0,
                                       MaxUsage=stats.memory_limit_bytes or 0, Measured=measured),
        # Nomad's ticks are MHz: the share of one core used, times a core's speed.
        CpuStats=models.CpuStats(Percent=stats.cpu_percent or 0.0, TotalTicks=(stats.cpu_percent or 0.0) / 100 * mhz,
                                 ThrottledPeriods=stats.cpu_throttled_periods or 0,
                                 ThrottledTime=stats.cpu_throttled_ns or 0,
                                 Measured=_cpu_measured(stats)))


def _cpu_measured(stats: TaskStats) -> list[str] | None:
    """What of the CPU was measured, in the names Nomad's ``alloc status -stats`` shows (it has no column for
    the ticks, which it shows as the "CPU" usage)."""
    measured = [name for name, value in (("Percent", stats.cpu_percent),
                                         ("Throttled Periods", stats.cpu_throttled_periods),
                                         ("Throttled Time", stats.cpu_throttled_ns)) if value is not None]
    return measured or None
