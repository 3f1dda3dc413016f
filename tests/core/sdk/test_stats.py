"""The sdk's measurements of a task: of real processes through /proc, of a real cgroup."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from herder import TaskStats
from herder.sdk import CgroupMounts, cgroup_mounts, cgroup_stats, process_stats
from tests.support.waiting import wait_for

MIB = 1 << 20
# Touches every page (bytes * int writes them), then says so and waits for stdin to close.
HOLDS_64_MIB = "import sys; b = b'x' * (64 << 20); print('ready', flush=True); sys.stdin.read()"
SPINS = "import sys; print('ready', flush=True)\nwhile True: pass"

Start = Callable[[str], "subprocess.Popen[str]"]


@pytest.fixture
def child() -> Iterator[Start]:
    """A Python child whose code the test gives through :func:`start`; killed after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(code: str) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True)
        started.append(process)
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        return process

    yield start
    for process in started:
        process.kill()
        process.communicate()


def test_memory_of_a_process_tree_is_its_processes_rss_summed(child: Start) -> None:
    holder, other = child(HOLDS_64_MIB), child(HOLDS_64_MIB)
    alone, both = process_stats([holder.pid]), process_stats([holder.pid, other.pid])
    assert alone.memory_rss_bytes is not None and alone.memory_rss_bytes >= 64 * MIB
    assert both.memory_rss_bytes is not None and both.memory_rss_bytes >= 128 * MIB
    assert (alone.pids, both.pids) == (1, 2)


def test_cpu_of_a_busy_process_grows_by_its_time_on_a_cpu(child: Start) -> None:
    spinner = child(SPINS)
    first = process_stats([spinner.pid]).cpu_total_ns
    assert first is not None
    wait_for(lambda: (process_stats([spinner.pid]).cpu_total_ns or 0) >= first + 200_000_000, 30,
             "the spinner to use 0.2 s of CPU more")


def test_processes_gone_count_for_nothing() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert process_stats([process.pid]) == TaskStats()


def test_an_older_handles_dict_is_read_for_what_it_names() -> None:
    assert TaskStats.of({"pid": 7, "memory_rss_bytes": 5 * MIB, "pod": "x"}) == TaskStats(memory_rss_bytes=5 * MIB)
    assert TaskStats.of({"memory_usage_bytes": "lots", "cpu_percent": True}) == TaskStats()
    assert TaskStats.of({"memory_usage_bytes": 1.5e6, "cpu_percent": 3}) == TaskStats(memory_usage_bytes=1_500_000,
                                                                                      cpu_percent=3.0)
    assert TaskStats.of(None) is None
    assert TaskStats.of(TaskStats(pids=1)) == TaskStats(pids=1)


@pytest.fixture
def cgroup() -> Iterator[str]:
    """A cgroup of its own in the memory, cpu and cpuacct hierarchies (or v2's), removed after the test."""
    if os.geteuid() != 0:
        pytest.skip("creating a cgroup takes root")
    if not _hierarchies():
        pytest.skip(f"no memory, cpu and cpuacct cgroups here: {cgroup_mounts()}")
    relative = f"herder-test-stats-{uuid.uuid4().hex[:8]}"
    directories = [root / relative for root in _hierarchies()]
    for directory in directories:
        directory.mkdir()
    try:
        yield relative
    finally:
        for directory in directories:
            wait_for(functools.partial(_empty, directory), 10, f"{directory} to be empty")
            directory.rmdir()


def test_a_cgroups_memory_limit_and_cpu(cgroup: str, child: Start) -> None:
    mounts = cgroup_mounts()
    memory = (mounts.unified or mounts.memory) / cgroup  # type: ignore[operator]
    (memory / ("memory.max" if mounts.unified else "memory.limit_in_bytes")).write_text(str(256 * MIB))
    assert cgroup_stats(cgroup).memory_usage_bytes == 0
    procs = [str(root / cgroup / "cgroup.procs") for root in _hierarchies()]
    join = f"import os; [open(p, 'w').write(str(os.getpid())) for p in {procs!r}]\n"
    child(join + HOLDS_64_MIB)
    spinner = child(join + SPINS)

    def counted() -> TaskStats | None:
        # Asked until both show: the kernel brings a cgroup's memory.stat up to date in the background.
        stats = cgroup_stats(cgroup)
        return stats if (stats.cpu_total_ns or 0) > 200_000_000 and (stats.memory_rss_bytes or 0) >= 64 * MIB \
            and (stats.memory_usage_bytes or 0) >= 64 * MIB else None

    stats = wait_for(counted, 30, "the cgroup to count 0.2 s of CPU and 64 MiB")
    assert stats.memory_limit_bytes == 256 * MIB
    assert stats.cpu_throttled_periods == 0  # no CPU quota set
    spinner.kill()


def test_a_cgroup_that_is_gone_tells_nothing() -> None:
    assert cgroup_stats(f"herder-test-stats-{uuid.uuid4().hex[:8]}").memory_usage_bytes is None


def _hierarchies() -> list[Path]:
    """Where a cgroup for :func:`cgroup_stats` goes: v2's hierarchy, or v1's memory, cpu and cpuacct
    (one mount point where they are mounted together); empty if one is missing."""
    mounts = cgroup_mounts()
    roots = [mounts.unified] if mounts.unified is not None else [mounts.memory, mounts.cpu, mounts.cpuacct]
    return list(dict.fromkeys(root for root in roots if root is not None)) if None not in roots else []


def _empty(cgroup: Path) -> bool:
    return not (cgroup / "cgroup.procs").read_text().split()


HYBRID = """\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
cgroup /sys/fs/cgroup/my\\040pids cgroup rw,nosuid,nodev,noexec,relatime,pids 0 0
"""


def test_the_cgroup_mounts_of_a_hybrid_host_and_of_a_unified_one(tmp_path: Path) -> None:
    hybrid = tmp_path / "hybrid"
    hybrid.write_text(HYBRID)
    root = Path("/sys/fs/cgroup")
    assert cgroup_mounts(hybrid) == CgroupMounts(
        unified=None, memory=root / "memory", cpuacct=root / "cpu,cpuacct", cpu=root / "cpu,cpuacct",
        hierarchies=(root / "unified", root / "cpu,cpuacct", root / "memory", root / "my pids"))
    unified = tmp_path / "unified"
    unified.write_text("cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n")
    assert cgroup_mounts(unified) == CgroupMounts(unified=root, memory=None, cpuacct=None, cpu=None)
