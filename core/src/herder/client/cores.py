"""Whole CPUs reserved for one task alone (``resources { cores = N }``), as Nomad's client reserves them.

One :class:`CoreAllocator` serves every allocation of a process, over the CPUs this process may run on.
A task asking for ``cores`` gets that many that no other live allocation holds, the lowest free ones;
a driver that can pin a task (a cpuset: exec's runc, docker) pins it to them, and the task sees them
as ``NOMAD_CPU_CORES`` (cpuset list notation, as Nomad sets it). The reservation of a task is kept in
its ``ctx.created`` (kind :data:`CORES`), persisted with its state, so a restarted herder holds the
cores of the tasks it reattaches. Tasks that reserve no cores are not kept off reserved ones.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping, Sequence

from herder.errors import PlacementError

CORES = "cores"
"""``ctx.created`` kind: the CPUs reserved for the task, in cpuset list notation."""


def cpuset(cores: Iterable[int]) -> str:
    """``cores`` in cpuset list notation (``0-2,5``)."""
    ordered = sorted(set(cores))
    runs: list[str] = []
    start = previous = None
    for core in [*ordered, None]:
        if core is not None and previous is not None and core == previous + 1:
            previous = core
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = core
    return ",".join(runs)


def parse_cpuset(text: str) -> tuple[int, ...]:
    """The CPUs of a cpuset list (``0-2,5``); ValueError if it is not one."""
    cores: list[int] = []
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        cores.extend(range(int(low), int(high or low) + 1))
    return tuple(cores)


class CoreAllocator:
    """Reserves whole CPUs of ``cpus`` (by default, those this process may run on) for tasks."""

    def __init__(self, cpus: Sequence[int] | None = None) -> None:
        self.cpus = tuple(sorted(cpus if cpus is not None else os.sched_getaffinity(0)))
        self._lock = threading.Lock()
        self._held: dict[str, dict[str, tuple[int, ...]]] = {}  # alloc ID -> task -> CPUs

    def allocate(self, alloc_id: str, wanted: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """Reserve ``wanted[task]`` CPUs for each task of allocation ``alloc_id`` that asks for some.

        :raises PlacementError: the node has not that many free, naming the task (nothing is reserved then).
        """
        with self._lock:
            free = [cpu for cpu in self.cpus if cpu not in self._taken()]
            given: dict[str, tuple[int, ...]] = {}
            for task, count in wanted.items():
                if count <= 0:
                    continue
                if count > len(free):
                    raise PlacementError(
                        f"Resources exhausted: task {task!r} asks for {count} cores, and {len(free)} of the node's "
                        f"{len(self.cpus)} are free (dimension \"cores\" exhausted)")
                given[task], free = tuple(free[:count]), free[count:]
            if given:
                self._held[alloc_id] = given
            return given

    def reserve_existing(self, alloc_id: str, held: Mapping[str, Sequence[int]]) -> None:
        """Hold again the CPUs an earlier herder reserved for the tasks of ``alloc_id`` (they run on them)."""
        with self._lock:
            if held:
                self._held[alloc_id] = {task: tuple(cores) for task, cores in held.items()}

    def release(self, alloc_id: str) -> None:
        with self._lock:
            self._held.pop(alloc_id, None)

    def _taken(self) -> set[int]:
        return {cpu for tasks in self._held.values() for cores in tasks.values() for cpu in cores}
