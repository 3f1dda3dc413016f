"""Measure a task's resource usage as a :class:`herder.TaskStats`: from ``/proc`` for a tree of processes,
from its cgroup where the driver has one.

:func:`process_stats` is what a handle of local processes reports (raw_exec,
java without isolation, qemu, ``rkt run``: :class:`SupervisedProcess` does it
for them); :func:`cgroup_stats` what a driver that puts its task in a cgroup
of its own reports (exec). Both only read counters: a call costs a few file
reads per process or per cgroup, and nothing is sampled in between.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from herder.objects import TaskStats

MOUNTS = Path("/proc/self/mounts")
CGROUP_ROOT = Path("/sys/fs/cgroup")
NS_PER_TICK = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
UNLIMITED = 1 << 62
"""A cgroup v1 memory limit at least this large means none (the kernel shows ``PAGE_COUNTER_MAX`` pages)."""


def process_stats(pids: Iterable[int]) -> TaskStats:
    """Memory and CPU of the processes ``pids`` together (those gone meanwhile are left out).

    RSS is summed over the processes (pages shared between them count once
    for each, as ``ps`` shows them); CPU time is each process's user and
    system time plus that of its children it has waited for, so that a
    short-lived child's CPU stays counted after it is gone.
    """
    rss_pages = ticks = count = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue  # gone meanwhile
        # The command name (field 2) may hold spaces and parentheses: count from its closing one.
        fields = text[text.rindex(b")") + 2 :].split()
        # fields[0] is field 3 (state): utime, stime, cutime, cstime are fields 14-17, rss field 24.
        ticks += sum(int(value) for value in fields[11:15])
        rss_pages += int(fields[21])
        count += 1
    if not count:
        return TaskStats()
    return TaskStats(memory_rss_bytes=rss_pages * PAGE_SIZE, cpu_total_ns=ticks * NS_PER_TICK, pids=count)


class CgroupMounts(NamedTuple):
    """Where this host mounts its cgroup hierarchies: v2's unified one at ``/sys/fs/cgroup``, or v1's."""

    unified: Path | None
    memory: Path | None
    cpuacct: Path | None
    cpu: Path | None
    hierarchies: tuple[Path, ...] = ()
    """On a v1 host, every hierarchy: each controller's, and a hybrid host's unified mount (which holds
    no controller, but where runc makes a container's cgroup too)."""


@functools.cache
def cgroup_mounts(mounts: Path = MOUNTS) -> CgroupMounts:
    """The cgroup hierarchies of this host, read once (they are mounted at boot)."""
    found: dict[str, Path] = {}
    hierarchies: list[Path] = []
    for line in mounts.read_text().splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        where, kind, options = Path(fields[1].replace("\\040", " ")), fields[2], fields[3].split(",")
        if kind == "cgroup2" and where == CGROUP_ROOT:
            return CgroupMounts(where, None, None, None)
        if kind in ("cgroup", "cgroup2"):
            hierarchies.append(where)
        if kind == "cgroup":
            for controller in ("memory", "cpuacct", "cpu"):
                if controller in options:
                    found.setdefault(controller, where)
    return CgroupMounts(None, found.get("memory"), found.get("cpuacct"), found.get("cpu"), tuple(hierarchies))


def cgroup_stats(relative: str, cpu_relative: str | None = None) -> TaskStats:
    """Memory and CPU of the cgroup ``relative`` (a path below each hierarchy's root), as far as it tells.

    ``cpu_relative`` is the cgroup whose CPU throttling counts, if not
    ``relative`` itself (throttling is per cgroup: runc's cgroup below the
    driver's). Figures the cgroup does not have (gone, no such controller)
    are None.
    """
    mounts = cgroup_mounts()
    relative = relative.strip("/")
    throttled = (cpu_relative or relative).strip("/")
    if mounts.unified is not None:
        return _v2_stats(mounts.unified / relative, mounts.unified / throttled)
    memory = mounts.memory / relative if mounts.memory is not None else None
    cpuacct = mounts.cpuacct / relative if mounts.cpuacct is not None else None
    cpu = mounts.cpu / throttled if mounts.cpu is not None else None
    stat = _keyed(memory / "memory.stat") if memory is not None else {}
    limit = _number(memory / "memory.limit_in_bytes") if memory is not None else None
    cpu_stat = _keyed(cpu / "cpu.stat") if cpu is not None else {}
    return TaskStats(
        memory_rss_bytes=stat.get("total_rss"),
        memory_usage_bytes=_number(memory / "memory.usage_in_bytes") if memory is not None else None,
        memory_limit_bytes=limit if limit is not None and limit < UNLIMITED else None,
        cpu_total_ns=_number(cpuacct / "cpuacct.usage") if cpuacct is not None else None,
        cpu_throttled_periods=cpu_stat.get("nr_throttled"),
        cpu_throttled_ns=cpu_stat.get("throttled_time"),
    )


def _v2_stats(directory: Path, throttled: Path) -> TaskStats:
    memory = _keyed(directory / "memory.stat")
    cpu = _keyed(directory / "cpu.stat")
    throttling = _keyed(throttled / "cpu.stat") if throttled != directory else cpu
    usage_usec = cpu.get("usage_usec")
    throttled_usec = throttling.get("throttled_usec")
    return TaskStats(
        memory_rss_bytes=memory.get("anon"),
        memory_usage_bytes=_number(directory / "memory.current"),
        memory_limit_bytes=_number(directory / "memory.max"),  # "max": no limit, None
        cpu_total_ns=None if usage_usec is None else usage_usec * 1000,
        cpu_throttled_periods=throttling.get("nr_throttled"),
        cpu_throttled_ns=None if throttled_usec is None else throttled_usec * 1000,
    )


def _number(path: Path) -> int | None:
    """The integer a cgroup file holds; None if it is gone or holds something else (v2's ``max``)."""
    try:
        return int(path.read_bytes())
    except (OSError, ValueError):
        return None


def _keyed(path: Path) -> dict[str, int]:
    """A cgroup file of ``key value`` lines (``memory.stat``, ``cpu.stat``); empty if it is gone."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            values[key] = int(value)
    return values
