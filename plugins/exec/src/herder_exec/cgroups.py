"""The cgroup that holds a task's memory limit, and what it says of an OOM kill.

runc creates the container's cgroup (``task``) itself, with the cpu shares
and the pids limit, and removes it as soon as the container exits: too soon
to read whether the kernel killed something for lack of memory. So the
memory limit sits one level up, on a cgroup the driver owns,
``<cgroup_parent>/<container id>``, which lives until cleanup:

- cgroup v2: its ``memory.events`` counts the OOM kills of everything below
  it (the counters are hierarchical), read after the exit.
- cgroup v1: counters are not hierarchical (the victim's own cgroup, gone,
  counted the kill), so an eventfd registered on the parent's
  ``memory.oom_control`` (as libcontainer's ``NotifyOOM``) is watched from
  a thread while herder runs; for an exit that no herder process watched,
  an init killed by SIGKILL that herder did not send, in a cgroup that hit
  its limit (``memory.failcnt``), counts as an OOM kill.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from herder.sdk import cgroup_mounts

REMOVE_WAIT = 5.0
"""How long a cgroup whose processes were just killed may stay busy."""


@dataclass(frozen=True)
class Hierarchy:
    """How this host mounts cgroups: ``version`` 1 or 2, the mount points, and memory's."""

    version: int
    mounts: tuple[Path, ...]
    memory: Path


def detect() -> Hierarchy | None:
    """The host's cgroups, as runc will use them: v2 when ``/sys/fs/cgroup`` itself is cgroup2 (unified),
    else v1 with a memory controller (a hybrid host's unified mount holds no controller); None without."""
    found = cgroup_mounts()
    if found.unified is not None:
        return Hierarchy(2, (found.unified,), found.unified)
    return Hierarchy(1, found.hierarchies, found.memory) if found.memory is not None else None


class TaskCgroup:
    """The cgroup ``relative`` (``herder/<container id>``) in every hierarchy: the memory limit, OOM
    evidence, and removal."""

    def __init__(self, hierarchy: Hierarchy, relative: str) -> None:
        self.hierarchy = hierarchy
        self.relative = relative.strip("/")
        self.memory_dir = hierarchy.memory / self.relative
        self._watch: _OomWatch | None = None

    @property
    def runc_path(self) -> str:
        """The ``cgroupsPath`` runc creates, and removes, below this cgroup."""
        return f"/{self.relative}/task"

    def create(self, memory_mb: int) -> None:
        """Create the cgroup with a limit of ``memory_mb`` MiB, swap included where the kernel accounts it."""
        limit = str(memory_mb * 1024 * 1024)
        if self.hierarchy.version == 2:
            self._enable_memory_above()
            self.memory_dir.mkdir(parents=True, exist_ok=True)
            (self.memory_dir / "memory.max").write_text(limit)
            _write_if_there(self.memory_dir / "memory.swap.max", "0")
        else:
            self.memory_dir.mkdir(parents=True, exist_ok=True)
            (self.memory_dir / "memory.limit_in_bytes").write_text(limit)
            _write_if_there(self.memory_dir / "memory.memsw.limit_in_bytes", limit)

    def _enable_memory_above(self) -> None:
        """v2: a cgroup has ``memory.max`` only if its parent's ``subtree_control`` enables memory."""
        directory = self.hierarchy.memory
        for part in Path(self.relative).parent.parts:
            control = directory / "cgroup.subtree_control"
            if "memory" not in control.read_text().split():
                control.write_text("+memory")
            directory = directory / part
            directory.mkdir(exist_ok=True)
        control = directory / "cgroup.subtree_control"
        if "memory" not in control.read_text().split():
            control.write_text("+memory")

    def watch(self) -> None:
        """v1: start noticing OOM kills as they happen (at start, and again after a reattach)."""
        if self.hierarchy.version == 1 and self._watch is None and self.memory_dir.is_dir():
            with contextlib.suppress(OSError):
                self._watch = _OomWatch(self.memory_dir)

    def oom_killed(self, init_sigkilled: bool) -> bool:
        """Whether the kernel killed a process of the task for lack of memory.

        ``init_sigkilled``: the container's init died of a SIGKILL that herder did not send.
        """
        try:
            if self.hierarchy.version == 2:
                return _field(self.memory_dir / "memory.events", "oom_kill") > 0
            if self._watch is not None and self._watch.fired.is_set():
                return True
            return init_sigkilled and int((self.memory_dir / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError):
            return False

    def remove(self) -> None:
        """Remove the cgroup (and runc's below it, if a crash left it) in every hierarchy; nothing if gone.

        :raises OSError: a cgroup still holds processes (EBUSY) after :data:`REMOVE_WAIT`.
        """
        for mount in self.hierarchy.mounts:
            for directory in (mount / self.relative / "task", mount / self.relative):
                _rmdir(directory)
        if self._watch is not None:
            self._watch.close()
            self._watch = None


def _rmdir(directory: Path) -> None:
    """Remove a cgroup; processes just killed (``runc delete --force``) may take a moment to leave it."""
    deadline = time.monotonic() + REMOVE_WAIT
    while True:
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _write_if_there(path: Path, value: str) -> None:
    """Write a limit file the kernel may lack (no swap accounting), or refuse; neither is an error."""
    with contextlib.suppress(OSError):
        path.write_text(value)


def _field(path: Path, name: str) -> int:
    for line in path.read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return int(value)
    return 0


class _OomWatch:
    """cgroup v1's OOM notification: an eventfd that the kernel signals when the cgroup runs out of memory.

    The kernel also signals it when the cgroup is removed: a wake-up counts
    only while the cgroup is still there.
    """

    def __init__(self, directory: Path) -> None:
        self.fired = threading.Event()
        self._directory = directory
        self._eventfd = os.eventfd(0, os.EFD_CLOEXEC)
        control = os.open(directory / "memory.oom_control", os.O_RDONLY | os.O_CLOEXEC)
        try:
            (directory / "cgroup.event_control").write_text(f"{self._eventfd} {control}")
        except OSError:
            os.close(self._eventfd)
            raise
        finally:
            os.close(control)
        self._stop_r, self._stop_w = os.pipe()
        threading.Thread(target=self._run, name=f"herder-exec-oom-{directory.name}", daemon=True).start()

    def _run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._eventfd, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
                os.eventfd_read(self._eventfd)
                if not self._directory.is_dir():
                    return
                self.fired.set()
        finally:
            for fd in (self._eventfd, self._stop_r):
                os.close(fd)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._stop_w, b"x")
            os.close(self._stop_w)
