"""The supervisor daemon: one per data dir, owning the processes of every task of it.

It outlives the herder process that started it. It starts the tasks'
processes as its own children, each leading its own process group; moves
their stdout and stderr into the rotating log files; records how they exit;
signals and stops them on request; and tells the client that owns a process
when it exits. See :mod:`herder.supervisor.protocol` for the wire format and
:class:`herder.supervisor.Supervisor` for the operations.

One thread and one :mod:`selectors` loop over the listening socket, the
client connections, each child's two output pipes and a pidfd per child. All
output moves through one shared buffer with ``readv(2)`` and ``write(2)``, so
a task costs a few small objects and file descriptors, never a buffer or a
thread of its own.

Standard library only (and the supervisor's own stdlib-only modules): this
process stays small for as long as any task runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import heapq
import itertools
import json
import logging
import logging.handlers
import os
import pwd
import resource
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder.supervisor.logfiles import PIPE_SIZE, STREAMS, RotatingFile, enlarge_pipe
from herder.supervisor.proctree import Cgroup, ProcessTree, SessionTree, cgroup_prefix, own_cgroup, process_table
from herder.supervisor.protocol import (
    LOCK_NAME,
    SOCKET_NAME,
    Squatted,
    check_socket_name,
    encode,
    log_path,
    open_state_dir,
    peer_allowed,
    peer_credentials,
    process_start_time,
    socket_address,
    state_dir,
)

log = logging.getLogger("herder.supervisor")

BUFFER_SIZE = 1024 * 1024
"""The one buffer all output passes through: a full pipe is moved in one read."""

DRAIN_TIMEOUT = 2.0
"""How long, after a process exits, its pipes are read while something outside its group still holds them."""

START_GRACE = 1.0
"""How long a supervisor with nothing to do waits after starting for its first client."""

MAX_LINE = 16 * 1024 * 1024
"""The longest request accepted; a client sending more is disconnected."""

MAX_LOG_SIZE = 1024 * 1024
"""The size at which the supervisor's log is rotated (to ``supervisor.log.1``, and so on)."""

LOG_BACKUPS = 2
"""How many rotated supervisor logs are kept."""

REFUSAL_LOG_BURST = 5
"""How many refused connections are logged one by one in :data:`REFUSAL_LOG_INTERVAL`; the rest are counted."""

REFUSAL_LOG_INTERVAL = 60
"""Seconds: the refused connections beyond the first :data:`REFUSAL_LOG_BURST` are logged as one count per interval."""

STALE_PROBE_TIMEOUT = 1.0
"""How long a supervisor starting waits for a socket left at its name to answer (a dead one's refuses at once)."""

_FD_LIMIT = 1 << 16
"""The soft limit on open files asked for: each task holds five (two pipes, two log files, a pidfd)."""

SCAN_INTERVAL = 2.0
"""How often the processes of tasks tracked without a cgroup are looked up, to keep track of orphans."""

RELEASE_RETRY = 0.05
"""How soon removing a task's cgroup is tried again while its killed processes are on their way out."""

RELEASE_TIMEOUT = 30.0
"""How long removing a task's cgroup is tried before the supervisor gives up on it, with a warning."""


class _Refused(Exception):
    """A request the supervisor does not carry out; its reply is ``ok: false`` with this message."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class Refusals:
    """Which refused connections are logged: the first :data:`REFUSAL_LOG_BURST` of each interval.

    A process of another user knocking in a loop must not fill the disk.
    """

    __slots__ = ("hidden", "logged", "since")

    def __init__(self) -> None:
        self.since = -float(REFUSAL_LOG_INTERVAL)
        self.logged = 0
        self.hidden = 0  # refused since the interval began, and not logged

    def note(self, now: float) -> bool:
        """Count a refusal at ``now``; whether to log it."""
        if now - self.since >= REFUSAL_LOG_INTERVAL and not self.hidden:
            self.since, self.logged = now, 0
        if self.logged < REFUSAL_LOG_BURST:
            self.logged += 1
            return True
        self.hidden += 1
        return False

    def remaining(self, now: float) -> float:
        """Seconds to the end of the interval."""
        return max(0.0, self.since + REFUSAL_LOG_INTERVAL - now)

    def take_hidden(self) -> int:
        """The refusals not logged: the summary of the interval, which ends here."""
        hidden, self.hidden = self.hidden, 0
        return hidden


class _Timer:
    __slots__ = ("callback", "cancelled", "deadline")

    def __init__(self, deadline: float, callback: Callable[[], None]) -> None:
        self.deadline = deadline
        self.callback = callback
        self.cancelled = False


class _Stream:
    """One output pipe of a process (its read end) and the log files it goes to."""

    __slots__ = ("capacity", "fd", "file", "name")

    def __init__(self, name: str, fd: int, file: RotatingFile) -> None:
        self.name = name
        self.fd = fd
        self.file = file
        self.capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)


class _Conn:
    """A client connection, and the session it said hello as."""

    __slots__ = ("closed", "inbuf", "keep", "on_lost", "outbuf", "said_bye", "session", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.session: str | None = None
        self.keep = True
        self.on_lost: dict[str, Any] | None = None
        self.said_bye = False
        self.closed = False


class _Lost:
    """A ``keep: false`` session that went away without ``bye``, until its processes have ended."""

    __slots__ = ("on_lost", "session", "waiting")

    def __init__(self, session: str, on_lost: dict[str, Any] | None, waiting: set[str]) -> None:
        self.session = session
        self.on_lost = on_lost
        self.waiting = waiting


class _Proc:
    """A supervised process, from its start until a client forgets its exit."""

    __slots__ = (
        "drain_timer", "exit", "id", "kill_timeout", "kill_timer", "lost", "owner", "pid", "pidfd", "popen",
        "returncode", "start_time", "stop_signal", "streams", "tree",
    )

    def __init__(self, id: str, popen: subprocess.Popen[bytes], tree: ProcessTree, pidfd: int,
                 streams: list[_Stream], stop_signal: int, kill_timeout: float, owner: _Conn) -> None:
        self.id = id
        self.popen = popen
        self.tree = tree  # every process of the task: signals and kills go to all of them
        self.pid = popen.pid
        self.start_time = process_start_time(popen.pid) or 0  # a zombie child still has its /proc entry
        self.pidfd = pidfd
        self.streams = streams  # the pipes not at end of input yet
        self.stop_signal = stop_signal
        self.kill_timeout = kill_timeout
        self.owner: _Conn | None = owner
        self.kill_timer: _Timer | None = None
        self.drain_timer: _Timer | None = None
        self.returncode: int | None = None  # set when the leader has exited
        self.exit: dict[str, int] | None = None  # set once every byte of output is in the files
        self.lost: _Lost | None = None

    def info(self) -> dict[str, Any]:
        cgroup = str(self.tree.path) if isinstance(self.tree, Cgroup) else None
        return {"pid": self.pid, "start_time": self.start_time, "exit": self.exit, "cgroup": cgroup}


class Listener:
    """The supervisor's listening socket, with the lock and the directory that go with it."""

    def __init__(self, sock: socket.socket, dir_fd: int, lock_fd: int) -> None:
        self.sock = sock
        self._dir_fd = dir_fd
        self._lock_fd = lock_fd

    def close(self) -> None:
        """Stop listening and remove the socket, while the lock still keeps any other supervisor away."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(SOCKET_NAME, dir_fd=self._dir_fd)
        self.sock.close()
        os.close(self._lock_fd)
        os.close(self._dir_fd)


def bind(data_dir: Path) -> Listener | None:
    """Listen on ``data_dir``'s supervisor socket; None when another supervisor of it runs.

    The lock file, locked for as long as the supervisor lives (a killed one
    lets go of it with its last descriptor), makes it a singleton. A socket
    found at the name with the lock free is a dead supervisor's, and is
    replaced; anything else there is refused.

    :raises Squatted: when the directory or the socket's name is not this user's own, or something
        that is not a supervisor of the data dir listens there.
    """
    dir_fd = open_state_dir(data_dir)
    lock_fd = -1
    try:
        lock_fd = os.open(LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            os.close(dir_fd)
            return None
        if check_socket_name(dir_fd, data_dir):
            _remove_stale_socket(dir_fd, data_dir)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(socket_address(dir_fd))
            sock.listen(128)
        except BaseException:
            sock.close()
            raise
    except BaseException:
        if lock_fd >= 0:
            os.close(lock_fd)
        os.close(dir_fd)
        raise
    sock.setblocking(False)
    return Listener(sock, dir_fd, lock_fd)


def _remove_stale_socket(dir_fd: int, data_dir: Path) -> None:
    """Remove the socket a dead supervisor left, unless something listens on it all the same."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(STALE_PROBE_TIMEOUT)
        try:
            probe.connect(socket_address(dir_fd))
        except ConnectionRefusedError:
            os.unlink(SOCKET_NAME, dir_fd=dir_fd)
            return
        except TimeoutError:  # a backlog full of connections nobody accepts: a listener all the same
            pid = uid = None
        else:
            pid, uid, _ = peer_credentials(probe)
    raise Squatted(f"process {pid} of uid {uid} listens on {state_dir(data_dir) / SOCKET_NAME}, but it is not "
                   "the supervisor of this data dir (which holds its lock file): stop it or remove the socket")


class Server:
    """The supervisor's event loop and state. :meth:`run` returns once it is idle.

    Each process goes into a cgroup of its own under ``cgroups`` (a writable
    cgroup hierarchy), or, with None, is tracked by session and parentage.
    """

    def __init__(self, data_dir: Path, listener: Listener, cgroups: Path | None = None) -> None:
        self._data_dir = data_dir
        self._listener = listener
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener.sock, selectors.EVENT_READ, self._accept)
        self._procs: dict[str, _Proc] = {}
        self._conns: set[_Conn] = set()
        self._timers: list[tuple[float, int, _Timer]] = []
        self._timer_seq = itertools.count()
        self._buffer = memoryview(bytearray(BUFFER_SIZE))
        self._uid = os.geteuid()
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)  # every child's stdin
        self._child_fd_limit = _raise_fd_limit()
        self._started = time.monotonic()
        self._done = False
        self._refusals = Refusals()
        # Its own within its data dir's: a name never comes back, even from the next supervisor of the data dir.
        self._cgroup_prefix = f"{cgroup_prefix(data_dir)}{secrets.token_hex(4)}-"
        self._cgroup_seq = itertools.count()
        self._releasing: set[ProcessTree] = set()  # trees of exited processes, until their cgroups are removed
        self._scan_timer: _Timer | None = None
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
        self._ops: dict[str, Callable[[_Conn, dict[str, Any]], dict[str, Any] | None]] = {
            "hello": self._hello, "spawn": self._spawn, "attach": self._attach, "signal": self._signal,
            "stop": self._stop, "forget": self._forget, "list": self._list, "bye": self._bye,
        }

    def run(self) -> None:
        """Serve until there is no process, no exit record and no client left."""
        self._arm(START_GRACE, self._check_idle)
        while not self._done:
            for key, events in self._selector.select(self._next_timeout()):
                try:
                    key.data(events)
                except Exception:  # a bug must not take every task down with the supervisor
                    log.exception("unexpected error")
            self._run_timers()
        self._summarize_refusals()
        self._selector.close()
        self._listener.close()
        os.close(self._devnull)

    # -- the loop ---------------------------------------------------------------------------------

    def _arm(self, delay: float, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(time.monotonic() + delay, callback)
        heapq.heappush(self._timers, (timer.deadline, next(self._timer_seq), timer))
        return timer

    def _next_timeout(self) -> float | None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        if not self._timers:
            return None
        return max(0.0, self._timers[0][0] - time.monotonic())

    def _run_timers(self) -> None:
        now = time.monotonic()
        while self._timers and self._timers[0][0] <= now:
            timer = heapq.heappop(self._timers)[2]
            if timer.cancelled:
                continue
            timer.cancelled = True  # fired: cancelling it later is a no-op
            try:
                timer.callback()
            except Exception:
                log.exception("unexpected error")

    def _check_idle(self) -> None:
        if (not self._procs and not self._conns and not self._releasing
                and time.monotonic() - self._started >= START_GRACE):
            self._done = True

    # -- clients ----------------------------------------------------------------------------------

    def _accept(self, _events: int) -> None:
        try:
            sock, _ = self._listener.sock.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        pid, uid, _ = peer_credentials(sock)
        if not peer_allowed(uid, self._uid):
            sock.close()
            if self._refusals.note(time.monotonic()):
                log.warning("refused a connection from pid %d of uid %d", pid, uid)
            elif self._refusals.hidden == 1:  # the first one left out: its summary is due at the interval's end
                self._arm(self._refusals.remaining(time.monotonic()), self._summarize_refusals)
            return
        sock.setblocking(False)
        conn = _Conn(sock)
        self._conns.add(conn)
        self._selector.register(sock, selectors.EVENT_READ, functools.partial(self._on_conn, conn))

    def _summarize_refusals(self) -> None:
        hidden = self._refusals.take_hidden()
        if hidden:
            log.warning("refused %d more connection(s) in the last %d s (not logged one by one)",
                        hidden, REFUSAL_LOG_INTERVAL)

    def _on_conn(self, conn: _Conn, events: int) -> None:
        if conn.closed:
            return
        if events & selectors.EVENT_WRITE:
            self._flush(conn)
        if not events & selectors.EVENT_READ:
            return
        try:
            data = conn.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._disconnected(conn)
            return
        conn.inbuf += data
        while not conn.closed and (end := conn.inbuf.find(b"\n")) >= 0:
            line = bytes(conn.inbuf[:end])
            del conn.inbuf[: end + 1]
            self._handle(conn, line)
        if len(conn.inbuf) > MAX_LINE:
            log.warning("session %s sent an oversized request; disconnecting it", conn.session)
            self._disconnected(conn)

    def _send(self, conn: _Conn, message: dict[str, Any]) -> None:
        if conn.closed:
            return
        conn.outbuf += encode(message)
        self._flush(conn)

    def _flush(self, conn: _Conn) -> None:
        """Send what the connection's socket takes now; wait for it to take the rest."""
        try:
            sent = conn.sock.send(conn.outbuf, socket.MSG_NOSIGNAL)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            # The client is gone; reading its end of input disconnects it.
            conn.outbuf.clear()
            sent = 0
        del conn.outbuf[:sent]
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        if self._selector.get_key(conn.sock).events != events:
            self._selector.modify(conn.sock, events, functools.partial(self._on_conn, conn))

    def _handle(self, conn: _Conn, line: bytes) -> None:
        rid = None
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise _Refused("a request is a JSON object")
            rid = message.get("rid")
            op = message.get("op")
            handler = self._ops.get(op) if isinstance(op, str) else None
            if handler is None:
                raise _Refused(f"unknown op {op!r}")
            if conn.session is None and op != "hello":
                raise _Refused("the first request must be hello")
            result = handler(conn, message) or {}
        except _Refused as err:
            self._send(conn, {"rid": rid, "ok": False, "error": str(err), **err.extra})
        except ValueError as err:  # json.JSONDecodeError included
            self._send(conn, {"rid": rid, "ok": False, "error": f"bad request: {err}"})
        except Exception as err:
            log.exception("request %r failed", line[:200])
            self._send(conn, {"rid": rid, "ok": False, "error": f"internal error: {err!r}"})
        else:
            self._send(conn, {"rid": rid, "ok": True, **result})

    def _disconnected(self, conn: _Conn) -> None:
        """The client went away: disown its processes, and stop them if its session asked for that."""
        conn.closed = True
        self._conns.discard(conn)
        self._selector.unregister(conn.sock)
        conn.sock.close()
        owned = [proc for proc in self._procs.values() if proc.owner is conn]
        for proc in owned:
            proc.owner = None
        # A session with nothing of its own here may still have asked for on_lost: its tasks
        # may be containers or VMs, which its on_lost command cleans up.
        if (owned or conn.on_lost) and conn.session is not None and not conn.said_bye and not conn.keep:
            self._lose(conn.session, conn.on_lost, owned)
        self._check_idle()

    def _lose(self, session: str, on_lost: dict[str, Any] | None, owned: list[_Proc]) -> None:
        """Stop the processes of a lost session; run its ``on_lost`` once they have all ended.

        Nobody will come back for their exits, so their records go as soon as
        the exits are in (unless a client attaches meanwhile).
        """
        lost = _Lost(session, on_lost, {proc.id for proc in owned if proc.exit is None})
        log.warning("session %s went away; stopping its %d process(es)", session, len(lost.waiting))
        for proc in owned:
            if proc.exit is not None:
                del self._procs[proc.id]
                continue
            proc.lost = lost
            if proc.returncode is None:
                self._stop_proc(proc, proc.stop_signal, proc.kill_timeout)
        if not lost.waiting:
            self._run_on_lost(lost)

    def _run_on_lost(self, lost: _Lost) -> None:
        if lost.on_lost is None:
            return
        argv = lost.on_lost["argv"]
        env = lost.on_lost.get("env")
        try:
            with open(log_path(self._data_dir), "ab") as output:
                helper = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=output,
                                          stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
            pidfd = os.pidfd_open(helper.pid)
        except (OSError, ValueError, subprocess.SubprocessError) as err:
            log.warning("session %s: cannot run on_lost %s: %s", lost.session, argv, err)
            return
        log.warning("session %s: on_lost %s started as pid %d", lost.session, argv, helper.pid)
        self._selector.register(pidfd, selectors.EVENT_READ, functools.partial(self._reap_helper, helper, pidfd))

    def _reap_helper(self, helper: subprocess.Popen[bytes], pidfd: int, _events: int) -> None:
        if helper.returncode is not None or helper.poll() is None:
            return  # reaped already (a stale event), or not ended yet
        self._selector.unregister(pidfd)
        os.close(pidfd)
        if helper.returncode:
            log.warning("on_lost %s ended with status %d", helper.args, helper.returncode)

    # -- requests ---------------------------------------------------------------------------------

    def _hello(self, conn: _Conn, message: dict[str, Any]) -> dict[str, Any]:
        if conn.session is not None:
            raise _Refused("hello was already said")
        session = _field(message, "session", str)
        keep = _field(message, "keep", bool)
        on_lost = message.get("on_lost")
        if on_lost is not None:
            _command(on_lost, "on_lost")
        conn.session, conn.keep, conn.on_lost = session, keep, on_lost
        return {"pid": os.getpid()}

    def _spawn(self, conn: _Conn, message: dict[str, Any]) -> dict[str, Any]:
        id = _field(message, "id", str)
        if id in self._procs:
            raise _Refused(f"process {id} exists already")
        argv = _command(message, "spawn")["argv"]
        env = _field(message, "env", dict)
        cwd = _field(message, "cwd", str, optional=True)
        user = _field(message, "user", str, optional=True)
        logs = _field(message, "logs", dict)
        stop_signal = _signal_field(message, "stop_signal")
        kill_timeout = float(_field(message, "kill_timeout", (int, float)))
        outputs = _field(logs, "paths", list, optional=True)
        if outputs is not None:
            proc = self._start_direct(id, argv, env, cwd, user, outputs, stop_signal, kill_timeout, conn)
            self._procs[id] = proc
            return proc.info()
        logs_dir, task = Path(_field(logs, "dir", str)), _field(logs, "task", str)
        max_files, max_file_size = _field(logs, "max_files", int), _field(logs, "max_file_size", int)
        files: list[RotatingFile] = []
        on_unsafe = functools.partial(self._unsafe_log_file, id, conn)
        try:
            for stream in STREAMS:
                files.append(RotatingFile(logs_dir, task, stream, max_files, max_file_size, on_unsafe))
        except (OSError, ValueError) as err:
            for file in files:
                file.close()
            raise _Refused(f"cannot open the log files: {err}") from err
        proc = self._start(id, argv, env, cwd, user, files, stop_signal, kill_timeout, conn)
        self._procs[id] = proc
        return proc.info()

    def _unsafe_log_file(self, id: str, spawner: _Conn, message: str) -> None:
        """Tell process ``id``'s owner that its log files held something planted (which was not followed)."""
        proc = self._procs.get(id)
        owner = spawner if proc is None else proc.owner  # None: it is being spawned
        if owner is not None:
            self._send(owner, {"event": "unsafe_log_file", "id": id, "message": message})

    def _start(self, id: str, argv: list[str], env: dict[str, str], cwd: str | None, user: str | None,
               files: list[RotatingFile], stop_signal: int, kill_timeout: float, owner: _Conn) -> _Proc:
        """Start a process whose output goes through pipes into ``files``; it owns them from then on."""
        pipes: list[tuple[int, int]] = []
        tree = self._new_tree()
        try:
            for _ in files:
                pipes.append(os.pipe())
            with tree.spawning():
                popen = subprocess.Popen(
                    argv, env=env, cwd=cwd, stdin=self._devnull, stdout=pipes[0][1], stderr=pipes[1][1],
                    start_new_session=True, close_fds=True, preexec_fn=self._child_fd_limit, **_identity(user),
                )
        except (OSError, ValueError, TypeError, LookupError, subprocess.SubprocessError) as err:
            _close(pipes, files)
            self._release(tree)
            raise _Refused(f"cannot start {argv[0]!r}: {err}") from err
        finally:
            for _, write_end in pipes:
                os.close(write_end)
        try:
            pidfd = self._watch(popen, tree)
        except OSError as err:  # out of file descriptors, say: not a process we could watch
            _close(pipes, files)
            raise _Refused(f"cannot watch {argv[0]!r}: {err}") from err
        streams = [_Stream(name, read_end, file)
                   for name, (read_end, _), file in zip(STREAMS, pipes, files, strict=True)]
        proc = _Proc(id, popen, tree, pidfd, streams, stop_signal, kill_timeout, owner)
        for stream in streams:
            os.set_blocking(stream.fd, False)
            self._selector.register(stream.fd, selectors.EVENT_READ,
                                    functools.partial(self._on_output, proc, stream))
        self._selector.register(pidfd, selectors.EVENT_READ, functools.partial(self._on_exit, proc))
        return proc

    def _start_direct(self, id: str, argv: list[str], env: dict[str, str], cwd: str | None, user: str | None,
                      outputs: list[Any], stop_signal: int, kill_timeout: float, owner: _Conn) -> _Proc:
        """Start a process whose stdout and stderr are the files at ``outputs``, opened for appending.

        Another program collects the output (Nomad's log FIFOs, say), so it
        does not pass through here; a FIFO nobody reads is refused at once
        rather than left to block the task.
        """
        if len(outputs) != len(STREAMS) or not all(isinstance(path, str) for path in outputs):
            raise _Refused("logs.paths must name a stdout and a stderr file")
        fds: list[int] = []
        tree = self._new_tree()
        try:
            for path in outputs:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
                fds.append(fd)
                os.set_blocking(fd, True)
            with tree.spawning():
                popen = subprocess.Popen(
                    argv, env=env, cwd=cwd, stdin=self._devnull, stdout=fds[0], stderr=fds[1],
                    start_new_session=True, close_fds=True, preexec_fn=self._child_fd_limit, **_identity(user),
                )
        except (OSError, ValueError, TypeError, LookupError, subprocess.SubprocessError) as err:
            self._release(tree)
            raise _Refused(f"cannot start {argv[0]!r}: {err}") from err
        finally:
            for fd in fds:
                os.close(fd)
        try:
            pidfd = self._watch(popen, tree)
        except OSError as err:
            raise _Refused(f"cannot watch {argv[0]!r}: {err}") from err
        proc = _Proc(id, popen, tree, pidfd, [], stop_signal, kill_timeout, owner)
        self._selector.register(pidfd, selectors.EVENT_READ, functools.partial(self._on_exit, proc))
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
            self._scan_timer = self._arm(SCAN_INTERVAL, self._scan_trees)
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
        trees = [proc.tree for proc in self._procs.values()
                 if proc.returncode is None and isinstance(proc.tree, SessionTree)]
        if not trees:
            self._scan_timer = None
            return
        table = process_table()
        for tree in trees:
            tree.scan(table)
        self._scan_timer = self._arm(SCAN_INTERVAL, self._scan_trees)

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
            self._releasing.discard(tree)
            self._check_idle()
        else:
            self._releasing.add(tree)
            self._arm(RELEASE_RETRY, functools.partial(self._release, tree, since))

    def _attach(self, conn: _Conn, message: dict[str, Any]) -> dict[str, Any]:
        proc = self._known(message)
        proc.owner = conn
        return proc.info()

    def _signal(self, conn: _Conn, message: dict[str, Any]) -> None:
        proc = self._known(message)
        sig = _signal_field(message)
        if proc.returncode is None:
            proc.tree.signal(sig)

    def _stop(self, conn: _Conn, message: dict[str, Any]) -> None:
        proc = self._known(message)
        self._stop_proc(proc, _signal_field(message), float(_field(message, "timeout", (int, float))))

    def _forget(self, conn: _Conn, message: dict[str, Any]) -> None:
        proc = self._procs.get(_field(message, "id", str))
        if proc is None:
            return  # forgotten already
        if proc.exit is None:
            raise _Refused(f"process {proc.id} has not exited")
        del self._procs[proc.id]
        self._check_idle()

    def _list(self, conn: _Conn, message: dict[str, Any]) -> dict[str, Any]:
        return {"procs": [
            {"id": proc.id, **proc.info(), "session": proc.owner.session if proc.owner else None,
             "running": proc.returncode is None}
            for proc in self._procs.values()
        ]}

    def _bye(self, conn: _Conn, message: dict[str, Any]) -> None:
        conn.said_bye = True
        for proc in self._procs.values():
            if proc.owner is conn:
                proc.owner = None

    def _known(self, message: dict[str, Any]) -> _Proc:
        id = _field(message, "id", str)
        proc = self._procs.get(id)
        if proc is None:
            raise _Refused(f"no process {id}", unknown=True)
        return proc

    # -- processes --------------------------------------------------------------------------------

    def _stop_proc(self, proc: _Proc, sig: int, timeout: float) -> None:
        """Signal every process of the task now, and kill them after ``timeout`` seconds unless the leader exits."""
        if proc.returncode is not None:
            return
        proc.tree.signal(sig)
        deadline = time.monotonic() + timeout
        if proc.kill_timer is None or proc.kill_timer.cancelled or deadline < proc.kill_timer.deadline:
            if proc.kill_timer is not None:
                proc.kill_timer.cancelled = True
            proc.kill_timer = self._arm(timeout, proc.tree.kill)

    def _on_output(self, proc: _Proc, stream: _Stream, _events: int) -> None:
        if stream.fd >= 0 and self._transfer(proc, stream) == 0:
            self._close_stream(proc, stream)

    def _transfer(self, proc: _Proc, stream: _Stream) -> int | None:
        """Move what the pipe holds into the log files (:meth:`RotatingFile.take_from`).

        Returns the bytes taken from the pipe, 0 at end of input (no writer
        left), None when the pipe is empty for now.
        """
        moved = stream.file.take_from(stream.fd, self._buffer)
        if moved is not None and moved >= stream.capacity and stream.capacity < PIPE_SIZE:
            # The pipe was full: this task writes in bulk, let it write ahead of the disk. Pipes grow
            # only then because a user's pipe buffers are limited in all (pipe-user-pages-soft, 64 MiB
            # by default): a thousand quiet tasks must not take them from the busy ones.
            stream.capacity = enlarge_pipe(stream.fd)
        return moved

    def _close_stream(self, proc: _Proc, stream: _Stream) -> None:
        self._selector.unregister(stream.fd)
        os.close(stream.fd)
        stream.fd = -1
        stream.file.close()
        proc.streams.remove(stream)
        if proc.returncode is not None and not proc.streams:
            self._publish(proc)

    def _on_exit(self, proc: _Proc, _events: int) -> None:
        """The leader exited: take every process of the task with it, then wait for the pipes to drain."""
        if proc.pidfd < 0:
            return
        # Before reaping: while the leader is a zombie, its pid (its session's id) cannot be reused.
        proc.tree.kill()
        returncode = proc.popen.poll()
        if returncode is None:
            return
        self._selector.unregister(proc.pidfd)
        os.close(proc.pidfd)
        proc.pidfd = -1
        proc.returncode = returncode
        self._release(proc.tree)
        if proc.kill_timer is not None:
            proc.kill_timer.cancelled = True
        if proc.streams:
            proc.drain_timer = self._arm(DRAIN_TIMEOUT, functools.partial(self._drain_timeout, proc))
        else:
            self._publish(proc)

    def _drain_timeout(self, proc: _Proc) -> None:
        """A process outside the task's group still holds its pipes: save what they hold, stop capturing."""
        for stream in list(proc.streams):
            log.warning("%s of %s: a process outside the task still holds the pipe; capture stops",
                        stream.name, proc.id)
            budget = PIPE_SIZE  # what a pipe holds at most: a writer that keeps writing cannot hold us here
            while budget > 0 and (moved := self._transfer(proc, stream)):
                budget -= moved
            self._close_stream(proc, stream)

    def _publish(self, proc: _Proc) -> None:
        """Every byte of output is in the files: record the exit and tell the owner."""
        assert proc.returncode is not None
        if proc.drain_timer is not None:
            proc.drain_timer.cancelled = True
        code = proc.returncode
        proc.exit = {"exit_code": 128 - code, "signal": -code} if code < 0 else {"exit_code": code, "signal": 0}
        if proc.owner is not None:
            self._send(proc.owner, {"event": "exit", "id": proc.id, **proc.exit})
        lost = proc.lost
        if lost is not None:
            lost.waiting.discard(proc.id)
            if proc.owner is None:
                del self._procs[proc.id]
            if not lost.waiting:
                self._run_on_lost(lost)
        self._check_idle()


def _close(pipes: list[tuple[int, int]], files: list[RotatingFile]) -> None:
    """Close the read ends of ``pipes`` and the ``files`` of a process that did not start."""
    for read_end, _ in pipes:
        os.close(read_end)
    for file in files:
        file.close()


def _identity(user: str | None) -> dict[str, Any]:
    """Popen arguments that run a process as ``user``: its uid and, when we are root, its groups.

    Switching only the uid would leave a task started by root in root's groups.
    """
    if not user:
        return {}
    if os.geteuid() != 0:
        return {"user": user}
    entry = pwd.getpwnam(user)
    return {"user": entry.pw_uid, "group": entry.pw_gid,
            "extra_groups": os.getgrouplist(entry.pw_name, entry.pw_gid)}


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


def _field(message: dict[str, Any], name: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
    value = message.get(name)
    if value is None and optional:
        return None
    # bool is an int, but never a valid number here
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise _Refused(f"bad request: {name} is {value!r}")
    return value


_SIGNALS = frozenset(int(sig) for sig in signal.valid_signals())


def _signal_field(message: dict[str, Any], name: str = "signal") -> int:
    sig: int = _field(message, name, int)
    if sig not in _SIGNALS:
        raise _Refused(f"bad request: no signal {sig}")
    return sig


def _command(spec: Any, what: str) -> dict[str, Any]:
    """Check a command: ``argv`` a non-empty list of strings, ``env`` (if given) strings to strings."""
    if not isinstance(spec, dict):
        raise _Refused(f"bad request: {what} is {spec!r}")
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(arg, str) for arg in argv):
        raise _Refused(f"bad request: {what} argv is {argv!r}")
    env = spec.get("env")
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise _Refused(f"bad request: {what} env must map strings to strings")
    return spec


def serve(data_dir: Path, cgroups: Path | None = None) -> int:
    """Run the supervisor of ``data_dir`` (``python -m herder.supervisor DATA_DIR``).

    Its processes get cgroups under ``cgroups`` (see :class:`Server`).

    Returns once the socket listens (a detached child serves from then on),
    or at once, with 0, when another supervisor of ``data_dir`` is running:
    whoever started it can connect as soon as this returns. Returns 1, saying
    why on stderr, when a name of the supervisor is squatted.
    """
    data_dir = data_dir.resolve()
    try:
        listener = bind(data_dir)
    except Squatted as err:
        print(f"herder supervisor: {err}", file=sys.stderr)
        return 1
    if listener is None:
        return 0
    if os.fork() > 0:
        os._exit(0)
    os.setsid()  # leave the starter's session: no terminal, no signal meant for its process group
    os.chdir("/")
    _setup_logging(data_dir)
    # Tasks must outlive a Ctrl-C or a hangup that hits the whole process group that started us.
    # Handlers, unlike SIG_IGN, are reset by exec: the tasks get these signals' defaults, even when
    # whoever started us ignored them (nohup ignores SIGHUP, and a shell's trap could not undo it).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _ignore_signal)
    log.info("supervisor of %s started", data_dir)
    Server(data_dir, listener, cgroups).run()
    log.info("supervisor of %s exits: nothing left to supervise", data_dir)
    return 0


def _ignore_signal(signum: int, _frame: object) -> None:
    log.info("ignored signal %d", signum)


class LogFile(logging.handlers.RotatingFileHandler):
    """The supervisor's log, rotated at :data:`MAX_LOG_SIZE`, :data:`LOG_BACKUPS` old ones kept.

    The descriptors ``follow`` (stdout and stderr: what Python prints of a
    crash goes there) are pointed at each new file, so that no output goes
    on growing a rotated one.
    """

    def __init__(self, path: Path, follow: tuple[int, ...] = ()) -> None:
        self._follow = follow
        super().__init__(path, maxBytes=MAX_LOG_SIZE, backupCount=LOG_BACKUPS)

    def _open(self) -> Any:
        stream = super()._open()
        for fd in self._follow:
            os.dup2(stream.fileno(), fd)
        return stream


def _setup_logging(data_dir: Path) -> None:
    """Log to the data dir's supervisor log, with stdin from /dev/null and stdout, stderr to the log too."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    handler = LogFile(log_path(data_dir), follow=(1, 2))
    handler.setFormatter(logging.Formatter("%(asctime)s supervisor[%(process)d] %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
