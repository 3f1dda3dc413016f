"""The supervisor's processes: starting them, capturing their output, their exits, stops and trees.

Each process leads its own process group, in a tree of its own (a cgroup,
else its sessions and descendants: :mod:`herder.supervisor.proctree`) that
signals and kills reach. Its stdout and stderr go through pipes into the
rotating log files, moved there by a :class:`~herder.supervisor.pump.LogPump`
each, or straight to files another program collects. Its exit is watched
through a pidfd, and published to its owner once every byte of its output is
in the files.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import pwd
import resource
import secrets
import selectors
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from herder.supervisor.logfiles import STREAMS, RotatingFile
from herder.supervisor.loop import Loop, Timer
from herder.supervisor.netns import NamespaceError, entered
from herder.supervisor.proctree import Cgroup, ProcessTree, SessionTree, cgroup_prefix, own_cgroup, process_table
from herder.supervisor.protocol import process_start_time
from herder.supervisor.pump import Dropped, LogPump

log = logging.getLogger("herder.supervisor")

BUFFER_SIZE = 1024 * 1024
"""The one buffer that output not spliced passes through: a full pipe is moved in one read."""

DRAIN_TIMEOUT = 2.0
"""How long, after a process exits, its pipes are read while something outside its group still holds them."""

SCAN_INTERVAL = 2.0
"""How often the processes of tasks tracked without a cgroup are looked up, to keep track of orphans."""

RELEASE_RETRY = 0.05
"""How soon removing a task's cgroup is tried again while its killed processes are on their way out."""

RELEASE_TIMEOUT = 30.0
"""How long removing a task's cgroup is tried before the supervisor gives up on it, with a warning."""

_FD_LIMIT = 1 << 16
"""The soft limit on open files asked for: each task holds five (two pipes, two log files, a pidfd)."""

_START_ERRORS = (OSError, ValueError, TypeError, LookupError, subprocess.SubprocessError)
"""What ``Popen`` raises for a process that cannot start (no such command, bad ``cwd``, unknown user...)."""


class CannotStart(Exception):
    """A process could not be started; the message says why."""


class Owner(Protocol):
    """Who hears of a process's exit and of its log files' troubles: a client's connection."""

    session: str | None

    def send(self, message: dict[str, Any]) -> None: ...


class Command(NamedTuple):
    """A process to start, as a spawn request describes it, checked."""

    id: str
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    user: str | None
    groups: tuple[int, ...]
    """Supplementary groups beyond ``user``'s own (a device's group, say), when the supervisor is root."""
    stop_signal: int
    """What stops it when its session is lost."""
    kill_timeout: float
    """How long after :attr:`stop_signal` it is killed."""
    netns: str | None = None
    """The network namespace it runs in (a path ``setns`` takes); None: the supervisor's own."""


class RotatingLogs(NamedTuple):
    """Where a process's output goes: ``dir/<task>.<stream>.<n>`` (see :class:`RotatingFile`)."""

    dir: Path
    task: str
    max_files: int
    max_file_size: int


class Proc:
    """A supervised process, from its start until a client forgets its exit."""

    __slots__ = ("drain_timer", "exit", "id", "kill_timeout", "kill_timer", "owner", "pid", "pidfd", "popen",
                 "pumps", "returncode", "start_time", "stop_signal", "tree")

    def __init__(self, command: Command, popen: subprocess.Popen[bytes], tree: ProcessTree, pidfd: int,
                 owner: Owner) -> None:
        self.id = command.id
        self.stop_signal = command.stop_signal  # the rest of the command (its environment) is not kept
        self.kill_timeout = command.kill_timeout
        self.popen = popen
        self.tree = tree  # every process of the task: signals and kills go to all of them
        self.pid = popen.pid
        self.start_time = process_start_time(popen.pid) or 0  # a zombie child still has its /proc entry
        self.pidfd = pidfd
        self.pumps: list[LogPump] = []  # the pipes not at end of input yet
        self.owner: Owner | None = owner
        self.kill_timer: Timer | None = None
        self.drain_timer: Timer | None = None
        self.returncode: int | None = None  # set when the leader has exited
        self.exit: dict[str, int] | None = None  # set once every byte of output is in the files

    def info(self) -> dict[str, Any]:
        cgroup = str(self.tree.path) if isinstance(self.tree, Cgroup) else None
        return {"pid": self.pid, "start_time": self.start_time, "exit": self.exit, "cgroup": cgroup}


class Processes:
    """The processes of the supervisor, by id, and the trees being released after they exited.

    Each process goes into a cgroup of its own under ``cgroups`` (a writable
    cgroup hierarchy), or, with None, is tracked by session and parentage.
    ``ended`` is called once a process's exit is published.
    """

    def __init__(self, loop: Loop, data_dir: Path, cgroups: Path | None, ended: Callable[[Proc], None]) -> None:
        self.procs: dict[str, Proc] = {}
        self._logged_before = 0  # by the pumps closed already
        self.releasing: set[ProcessTree] = set()  # trees of exited processes, until their cgroups are removed
        self._loop = loop
        self._ended = ended
        self._buffer = memoryview(bytearray(BUFFER_SIZE))
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)  # every child's stdin
        self._child_fd_limit = _raise_fd_limit()
        # Its own within its data dir's: a name never comes back, even from the next supervisor of the data dir.
        self._cgroup_prefix = f"{cgroup_prefix(data_dir)}{secrets.token_hex(4)}-"
        self._cgroup_seq = itertools.count()
        self._scan_timer: Timer | None = None
        self._cgroups = cgroups
        self._cgroup_home: Path | None = None  # where the supervisor returns after starting a process in a cgroup
        if cgroups is not None:
            try:
                self._cgroup_home = own_cgroup(cgroups)
            except (OSError, ValueError) as err:
                log.warning("cannot use cgroups in %s: %s", cgroups, err)
                self._cgroups = None
        if self._cgroups is None:
            log.info("no cgroups: processes are tracked by session and parentage")
        else:
            log.info("each process gets a cgroup in %s", self._cgroups)
            self._remove_stale_cgroups(self._cgroups, cgroup_prefix(data_dir))

    @property
    def logged(self) -> int:
        """Bytes of output the processes' pumps took from their pipes (into the log files, or dropped)."""
        return self._logged_before + sum(pump.taken for proc in self.procs.values() for pump in proc.pumps)

    @property
    def idle(self) -> bool:
        """No process, no exit record, no cgroup left to remove."""
        return not self.procs and not self.releasing

    def close(self) -> None:
        os.close(self._devnull)

    # -- starting ---------------------------------------------------------------------------------

    def spawn(self, command: Command, outputs: RotatingLogs | Sequence[str], owner: Owner) -> Proc:
        """Start ``command``, its output into the rotating files of ``outputs``, or into the two files named.

        :raises CannotStart: with the reason.
        """
        if isinstance(outputs, RotatingLogs):
            proc = self._spawn_logged(command, outputs, owner)
        else:
            proc = self._spawn_direct(command, outputs, owner)
        self.procs[proc.id] = proc
        return proc

    def _spawn_logged(self, command: Command, logs: RotatingLogs, owner: Owner) -> Proc:
        """Start a process whose output goes through pipes into the rotating files, by a pump each."""
        files: list[RotatingFile] = []
        on_unsafe = functools.partial(self._unsafe_log_file, command.id, owner)
        try:
            for stream in STREAMS:
                files.append(RotatingFile(logs.dir, logs.task, stream, logs.max_files, logs.max_file_size, on_unsafe))
        except (OSError, ValueError) as err:
            _close([], files)
            raise CannotStart(f"cannot open the log files: {err}") from err
        pipes: list[tuple[int, int]] = []
        try:
            try:
                for _ in files:
                    pipes.append(os.pipe())
            except OSError as err:  # out of file descriptors, say
                raise CannotStart(f"cannot start {command.argv[0]!r}: {err}") from err
            proc = self._start(command, pipes[0][1], pipes[1][1], owner)
        except CannotStart:
            _close([read_end for read_end, _ in pipes], files)
            raise
        finally:
            for _, write_end in pipes:
                os.close(write_end)
        for stream, (read_end, _), file in zip(STREAMS, pipes, files, strict=True):
            os.set_blocking(read_end, False)
            pump = LogPump(stream, read_end, file, functools.partial(self._dropped, proc))
            proc.pumps.append(pump)
            self._loop.register(read_end, selectors.EVENT_READ, functools.partial(self._on_output, proc, pump))
        return proc

    def _spawn_direct(self, command: Command, paths: Sequence[str], owner: Owner) -> Proc:
        """Start a process whose stdout and stderr are the files at ``paths``, opened for appending.

        Another program collects the output (Nomad's log FIFOs, say), so it
        does not pass through here; a FIFO nobody reads is refused at once
        rather than left to block the task.
        """
        fds: list[int] = []
        try:
            for path in paths:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
                fds.append(fd)
                os.set_blocking(fd, True)
            return self._start(command, fds[0], fds[1], owner)
        except OSError as err:
            raise CannotStart(f"cannot start {command.argv[0]!r}: {err}") from err
        finally:
            for fd in fds:
                os.close(fd)

    def _start(self, command: Command, stdout: int, stderr: int, owner: Owner) -> Proc:
        """Start ``command`` with these as its stdout and stderr, in a tree of its own, and watch it exit."""
        tree = self._new_tree()
        try:
            with tree.spawning(), entered(command.netns):
                popen = subprocess.Popen(
                    command.argv, env=command.env, cwd=command.cwd, stdin=self._devnull, stdout=stdout,
                    stderr=stderr, start_new_session=True, close_fds=True, preexec_fn=self._child_fd_limit,
                    **_identity(command.user, command.groups),
                )
        except NamespaceError as err:
            self._release(tree)
            raise CannotStart(f"cannot start {command.argv[0]!r}: {err}") from err
        except _START_ERRORS as err:
            self._release(tree)
            raise CannotStart(f"cannot start {command.argv[0]!r}: {err}") from err
        try:
            pidfd = self._watch(popen, tree)
        except OSError as err:  # out of file descriptors, say: not a process we could watch
            raise CannotStart(f"cannot watch {command.argv[0]!r}: {err}") from err
        proc = Proc(command, popen, tree, pidfd, owner)
        self._loop.register(pidfd, selectors.EVENT_READ, functools.partial(self._on_exit, proc))
        return proc

    def _new_tree(self) -> ProcessTree:
        """What will hold the next process and all it starts: a new cgroup, or else its session and children."""
        if self._cgroups is not None and self._cgroup_home is not None:
            try:
                return Cgroup.create(self._cgroups / f"{self._cgroup_prefix}{next(self._cgroup_seq)}",
                                     self._cgroup_home)
            except OSError as err:
                log.warning("cannot create a cgroup in %s; tracking the process by session instead: %s",
                            self._cgroups, err)
        if self._scan_timer is None:
            self._scan_timer = self._loop.call_later(SCAN_INTERVAL, self._scan_trees)
        return SessionTree()

    def _watch(self, popen: subprocess.Popen[bytes], tree: ProcessTree) -> int:
        """A pidfd of a process just started in ``tree``; if there is none, the tree is killed."""
        tree.started(popen.pid)
        try:
            return os.pidfd_open(popen.pid)
        except OSError:
            tree.kill()
            popen.wait()
            self._release(tree)
            raise

    # -- what clients ask -------------------------------------------------------------------------

    def signal(self, proc: Proc, sig: int) -> None:
        """Send ``sig`` to every process of ``proc``'s tree, while its leader runs."""
        if proc.returncode is None:
            proc.tree.signal(sig)

    def stop(self, proc: Proc, sig: int, timeout: float) -> None:
        """Signal every process of the task now, and kill them after ``timeout`` seconds unless the leader exits."""
        if proc.returncode is not None:
            return
        proc.tree.signal(sig)
        deadline = time.monotonic() + timeout
        if proc.kill_timer is None or proc.kill_timer.cancelled or deadline < proc.kill_timer.deadline:
            if proc.kill_timer is not None:
                proc.kill_timer.cancel()
            proc.kill_timer = self._loop.call_later(timeout, proc.tree.kill)

    def forget(self, proc: Proc) -> None:
        """Drop the record of a process whose exit is published."""
        del self.procs[proc.id]

    def disown(self, owner: Owner) -> list[Proc]:
        """The processes ``owner`` owned, which nobody owns from now on."""
        owned = [proc for proc in self.procs.values() if proc.owner is owner]
        for proc in owned:
            proc.owner = None
        return owned

    # -- output and exits -------------------------------------------------------------------------

    def _unsafe_log_file(self, id: str, spawner: Owner, message: str) -> None:
        """Tell process ``id``'s owner that its log files held something planted (which was not followed)."""
        proc = self.procs.get(id)
        owner = spawner if proc is None else proc.owner  # None: it is being spawned
        if owner is not None:
            owner.send({"event": "unsafe_log_file", "id": id, "message": message})

    def _dropped(self, proc: Proc, dropped: Dropped) -> None:
        """Tell ``proc``'s owner that output is being dropped, or how much was."""
        if proc.owner is not None:
            proc.owner.send({"event": "logs_dropped", "id": proc.id, **dropped._asdict()})

    def _on_output(self, proc: Proc, pump: LogPump, _events: int) -> None:
        if pump.fd >= 0 and pump.pump(self._buffer) == 0:
            self._close_pump(proc, pump)

    def _close_pump(self, proc: Proc, pump: LogPump) -> None:
        self._loop.unregister(pump.fd)
        pump.close()
        proc.pumps.remove(pump)
        self._logged_before += pump.taken
        if proc.returncode is not None and not proc.pumps:
            self._publish(proc)

    def _on_exit(self, proc: Proc, _events: int) -> None:
        """The leader exited: take every process of the task with it, then wait for the pipes to drain."""
        if proc.pidfd < 0:
            return
        # Before reaping: while the leader is a zombie, its pid (its session's id) cannot be reused.
        proc.tree.kill()
        returncode = proc.popen.poll()
        if returncode is None:
            return
        self._loop.unregister(proc.pidfd)
        os.close(proc.pidfd)
        proc.pidfd = -1
        proc.returncode = returncode
        self._release(proc.tree)
        if proc.kill_timer is not None:
            proc.kill_timer.cancel()
        if proc.pumps:
            proc.drain_timer = self._loop.call_later(DRAIN_TIMEOUT, functools.partial(self._drain_timeout, proc))
        else:
            self._publish(proc)

    def _drain_timeout(self, proc: Proc) -> None:
        """A process outside the task's group still holds its pipes: save what they hold, stop capturing."""
        for pump in list(proc.pumps):
            log.warning("%s of %s: a process outside the task still holds the pipe; capture stops",
                        pump.stream, proc.id)
            pump.drain(self._buffer)
            self._close_pump(proc, pump)

    def _publish(self, proc: Proc) -> None:
        """Every byte of output is in the files: record the exit and tell the owner."""
        assert proc.returncode is not None
        if proc.drain_timer is not None:
            proc.drain_timer.cancel()
        code = proc.returncode
        proc.exit = {"exit_code": 128 - code, "signal": -code} if code < 0 else {"exit_code": code, "signal": 0}
        if proc.owner is not None:
            proc.owner.send({"event": "exit", "id": proc.id, **proc.exit})
        self._ended(proc)

    # -- trees ------------------------------------------------------------------------------------

    def _remove_stale_cgroups(self, cgroups: Path, prefix: str) -> None:
        """Kill and remove the cgroups a supervisor of the data dir left when it was killed.

        There is one supervisor per data dir: whatever runs in them is an
        orphan nobody can reach, which a client would kill on recovering it.
        """
        for path in cgroups.glob(f"{prefix}*"):
            log.warning("killing what is left in %s, the cgroup of a supervisor that was killed", path)
            self._release(Cgroup(path))

    def _scan_trees(self) -> None:
        """Look up the processes of the running trees without a cgroup, while there are any."""
        trees = [proc.tree for proc in self.procs.values()
                 if proc.returncode is None and isinstance(proc.tree, SessionTree)]
        if not trees:
            self._scan_timer = None
            return
        table = process_table()
        for tree in trees:
            tree.scan(table)
        self._scan_timer = self._loop.call_later(SCAN_INTERVAL, self._scan_trees)

    def _release(self, tree: ProcessTree, since: float | None = None) -> None:
        """Kill what is left of ``tree`` and remove its cgroup, trying again while its processes exit."""
        since = time.monotonic() if since is None else since
        try:
            released = tree.release()
        except OSError as err:
            log.warning("cannot remove %s: %s", tree, err)
            released = True
        if not released and time.monotonic() - since > RELEASE_TIMEOUT:
            log.warning("%s still holds processes after %g s; leaving it", tree, RELEASE_TIMEOUT)
            released = True
        if released:
            self.releasing.discard(tree)
        else:
            self.releasing.add(tree)
            self._loop.call_later(RELEASE_RETRY, functools.partial(self._release, tree, since))


def _close(fds: list[int], files: list[RotatingFile]) -> None:
    """Close the pipes' read ends and the ``files`` of a process that did not start."""
    for fd in fds:
        os.close(fd)
    for file in files:
        file.close()


def _identity(user: str | None, groups: Sequence[int] = ()) -> dict[str, Any]:
    """Popen arguments that run a process as ``user``: its uid and, when we are root, its groups and
    ``groups`` besides.

    Switching only the uid would leave a task started by root in root's groups.
    """
    if not user:
        return {}
    if os.geteuid() != 0:
        return {"user": user}
    entry = pwd.getpwnam(user)
    own = os.getgrouplist(entry.pw_name, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid,
            "extra_groups": [*own, *(gid for gid in groups if gid not in own)]}


def _raise_fd_limit() -> Callable[[], None] | None:
    """Raise this process's soft limit on open files; return what restores it in a child, if needed.

    The supervisor holds a few descriptors per task, more than the usual soft
    limit of 1024 allows for a few hundred tasks; its tasks get the limit
    they would have had anyway.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _FD_LIMIT if hard == resource.RLIM_INFINITY else min(hard, _FD_LIMIT)
    if soft >= target:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return None
    return functools.partial(resource.setrlimit, resource.RLIMIT_NOFILE, (soft, hard))
