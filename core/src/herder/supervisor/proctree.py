"""Every process of a supervised task: found through a cgroup where the host allows it, else by session and parentage.

A task's process leads its own process group, but whatever it starts can
leave the group and the session (``setsid()``, a double fork) and so escape a
signal to the group. The supervisor therefore puts each process it starts in
a :class:`ProcessTree`:

- :class:`Cgroup`, a cgroup of its own in a writable hierarchy (cgroup v2, or
  a v1 hierarchy such as freezer): every descendant stays in it whatever
  session it makes, and only root can move it out. The process is born in
  it (the supervisor steps into the cgroup while it forks). It is killed at once with
  ``cgroup.kill`` (v2), or frozen, killed and thawed (v1 freezer), so that
  nothing forks meanwhile; elsewhere it is killed until empty.
- :class:`SessionTree`, when there is no cgroup to use (the supervisor is not
  root, no hierarchy is writable): the processes found in ``/proc`` by
  parentage and session id, rescanned now and then, as Nomad's executor does
  without cgroups. A process that double-forks into a new session between
  two scans is out of its reach.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

CGROUP_ROOT = Path("/sys/fs/cgroup")

V1_HIERARCHIES = ("freezer", "pids", "cpuacct")
"""The cgroup v1 hierarchies a task's cgroup may go in, best first: freezer stops forks while it is killed."""

FREEZE_TIMEOUT = 0.5
"""How long a v1 freezer cgroup may take to freeze before its processes are killed anyway."""

KILL_ROUNDS = 100
"""How many times a cgroup without freezer or ``cgroup.kill`` is read and killed, to catch what forked meanwhile."""


class ProcessTree:
    """The processes of one supervised process: its leader and everything the leader started.

    The base class tracks nothing; subclasses say how the processes are found.
    """

    def spawning(self) -> contextlib.AbstractContextManager[None]:
        """Around starting the leader: what the caller starts meanwhile is born in the tree."""
        return contextlib.nullcontext()

    def started(self, pid: int) -> None:
        """The leader runs as ``pid``."""

    def pids(self) -> list[int]:
        """The processes of the tree now."""
        return []

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every process of the tree."""
        for pid in self.pids():
            _kill(pid, sig)

    def kill(self) -> None:
        """SIGKILL every process of the tree."""
        self.signal(signal.SIGKILL)

    def release(self) -> bool:
        """Once the leader has exited and the tree was killed: drop what tracked it.

        False while killed processes are still on their way out: call again later.
        """
        return True


class Cgroup(ProcessTree):
    """The cgroup at ``path``, of one supervised process: :meth:`create` makes a new one.

    ``home`` is the cgroup the caller returns to after :meth:`spawning`.
    """

    def __init__(self, path: Path, home: Path | None = None) -> None:
        self.path = path
        self.home = home

    @classmethod
    def create(cls, path: Path, home: Path) -> Cgroup:
        """A new cgroup at ``path``, for the caller to start a process in from ``home``."""
        os.mkdir(path, 0o755)
        return cls(path, home)

    def __repr__(self) -> str:
        return f"<Cgroup {self.path}>"

    @contextlib.contextmanager
    def spawning(self) -> Iterator[None]:
        """The caller itself is in the cgroup meanwhile, so the child it forks is born there.

        Rather than the child joining between fork and exec: that would take
        a Python ``preexec_fn``, which makes every start a full ``fork()``
        (milliseconds) instead of a ``vfork()``.
        """
        if self.home is None:
            raise ValueError(f"{self.path}: no cgroup to return to")
        _write(self.path / "cgroup.procs", b"0")  # 0 is the writer itself
        try:
            yield
        finally:
            _write(self.home / "cgroup.procs", b"0")

    def pids(self) -> list[int]:
        try:
            return [int(line) for line in (self.path / "cgroup.procs").read_bytes().split()]
        except FileNotFoundError:
            return []

    def kill(self) -> None:
        pids = self.pids()
        if not pids:
            return
        # Should the supervisor be in it, it must be neither killed nor frozen: then only the loop below kills.
        whole = os.getpid() not in pids
        if whole and (self.path / "cgroup.kill").exists():  # cgroup v2 (Linux 5.14 on): forks included
            _write(self.path / "cgroup.kill", b"1")
            return
        killed = self._kill_frozen() if whole and (self.path / "freezer.state").exists() else set()
        # Killed processes stay listed until they are out; one that forked meanwhile shows a new pid.
        for _ in range(KILL_ROUNDS):
            new = set(self.pids()) - killed
            if not new:
                return
            for pid in new:
                _kill(pid, signal.SIGKILL)
            killed |= new

    def release(self) -> bool:
        self.kill()  # what is left (a cgroup left by a supervisor that was killed is released as it is)
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError as err:
            if err.errno == errno.EBUSY:  # a killed process is not out yet
                return False
            raise
        return True

    def _kill_frozen(self) -> set[int]:
        """v1 freezer: freeze the cgroup, SIGKILL every process in it, thaw it (they die as they thaw).

        Returns the processes killed.
        """
        state = self.path / "freezer.state"
        _write(state, b"FROZEN")
        try:
            deadline = time.monotonic() + FREEZE_TIMEOUT
            while state.read_bytes().strip() != b"FROZEN" and time.monotonic() < deadline:
                time.sleep(0.001)
            killed = set(self.pids())
            for pid in killed:
                _kill(pid, signal.SIGKILL)
        finally:
            _write(state, b"THAWED")
        return killed


class ProcessEntry(NamedTuple):
    """What :func:`process_table` knows of a process."""

    ppid: int
    sid: int
    start_time: int
    zombie: bool = False
    """Ended, and not yet waited for by its parent."""


class SessionTree(ProcessTree):
    """The leader, its descendants and the members of their sessions, as ``/proc`` shows them.

    A descendant whose parent exited is found again by its session, or by
    having been seen in an earlier :meth:`scan`; the supervisor scans every
    tree now and then for that.
    """

    def __init__(self) -> None:
        self._leader = 0
        self._members: dict[int, int] = {}  # pid -> start time, so that a reused pid is not taken for a member

    def started(self, pid: int) -> None:
        self._leader = pid

    def pids(self) -> list[int]:
        self.scan(process_table())
        return list(self._members)

    def scan(self, table: dict[int, ProcessEntry]) -> None:
        """Update the members from ``table``: the leader, and every process whose parent or session is a member's."""
        if not self._leader:
            return  # not started: a session id of 0 would take in the kernel's threads
        members = {pid: start for pid, start in self._members.items()
                   if (entry := table.get(pid)) is not None and entry.start_time == start}
        # The leader started a session of its own; any other session in the tree was started by a member.
        sessions = {self._leader, *(table[pid].sid for pid in members)}
        grew = True
        while grew:
            grew = False
            for pid, entry in table.items():
                if pid not in members and (pid == self._leader or entry.ppid in members or entry.sid in sessions):
                    members[pid] = entry.start_time
                    sessions.add(entry.sid)
                    grew = True
        self._members = members


def process_table() -> dict[int, ProcessEntry]:
    """Every process of the host (zombies included): its parent, session and start time."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            continue  # gone meanwhile
        # The command name (field 2) may hold spaces and parentheses: count from its closing one.
        fields = text[text.rindex(b")") + 2 :].split()
        table[int(entry.name)] = ProcessEntry(ppid=int(fields[1]), sid=int(fields[3]), start_time=int(fields[19]),
                                              zombie=fields[0] == b"Z")
    return table


def own_cgroup(hierarchy: Path) -> Path:
    """The cgroup of the calling process in ``hierarchy`` (a cgroup mount, or a cgroup in one).

    :raises ValueError: when ``/proc/self/cgroup`` names none in that hierarchy.
    """
    mount = hierarchy.resolve()
    while (mount.parent / "cgroup.procs").exists():
        mount = mount.parent
    unified = (mount / "cgroup.controllers").exists()
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        if (number == "0" and not controllers) if unified else set(controllers.split(",")) == set(
                mount.name.split(",")):
            return mount / path.lstrip("/")
    raise ValueError(f"{hierarchy}: not a cgroup hierarchy this process is in")


def cgroup_prefix(data_dir: Path) -> str:
    """How the names of the cgroups of ``data_dir``'s supervisor begin: one data dir's never meet another's."""
    return f"herder-{hashlib.sha256(os.fsencode(os.path.realpath(data_dir))).hexdigest()[:12]}-"


def cgroup_hierarchy(root: Path = CGROUP_ROOT) -> Path | None:
    """Where supervised processes' cgroups go: None when not root or no hierarchy is writable.

    The unified hierarchy when ``root`` is one (cgroup v2), else the first
    mounted v1 hierarchy of :data:`V1_HIERARCHIES`. A hybrid host's
    ``unified`` mount is not used: containers started by runc there would stay
    in the task's cgroup rather than move to their own.
    """
    if os.geteuid() != 0:
        return None
    unified = (root / "cgroup.controllers").exists()
    for path in [root] if unified else [root / name for name in V1_HIERARCHIES]:
        if (path / "cgroup.procs").exists() and os.access(path, os.W_OK):
            return path
    return None


def _kill(pid: int, sig: int) -> None:
    if pid == os.getpid():
        return  # the supervisor, in a cgroup it is starting a process in
    # Exited meanwhile; or, without cgroups and not root, a process that became another user's.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to a cgroup file (in one write: the kernel takes each write as a command)."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
