"""The connection of one herder process to the process supervisor of its data dir.

:class:`Supervisor` starts the supervisor (``python -m herder.supervisor
DATA_DIR``) when nothing listens yet, and keeps one connection to it: many
threads call it at once, a reader thread hands each its reply and records
the exits the supervisor reports, calling back whoever asked to hear of them
(:meth:`Supervisor.on_exit`), so that no thread need wait for an exit.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from herder.errors import HerderError
from herder.supervisor.protocol import (
    Squatted,
    check_socket_name,
    encode,
    log_path,
    open_state_dir,
    peer_allowed,
    peer_credentials,
    socket_address,
)
from herder.supervisor.pump import Dropped

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 5.0
"""How long :meth:`Supervisor.connect` tries, starting the supervisor if need be."""


class SupervisorError(HerderError):
    """The supervisor refused a request (a command that cannot start, an unknown process, ...)."""


class SupervisorUnavailable(SupervisorError):
    """The supervisor cannot be reached, or the connection to it broke."""


class _UnknownProcess(SupervisorError):
    """The supervisor has no process of that id."""


@dataclass(frozen=True)
class ExitInfo:
    """How a supervised process exited: killed by signal N is exit code 128+N and ``signal`` N."""

    exit_code: int
    signal: int = 0


@dataclass(frozen=True)
class ProcInfo:
    """A supervised process: ``start_time`` (see :func:`~herder.supervisor.protocol.process_start_time`)
    tells its pid from a reused one; ``exit`` is set once it has exited; ``cgroup`` is the path of the
    cgroup that holds it and all it started, if it has one."""

    id: str
    pid: int
    start_time: int
    exit: ExitInfo | None = None
    cgroup: str | None = None


@dataclass(frozen=True)
class ProcStatus:
    """One entry of :meth:`Supervisor.list`: ``session`` owns it (None: nobody), ``running`` while
    its leader lives."""

    id: str
    pid: int
    start_time: int
    session: str | None
    running: bool
    exit: ExitInfo | None


@dataclass(frozen=True)
class Figures:
    """What the supervisor reports of itself: its processes (running, and exited but not forgotten),
    and the bytes of output it took from their pipes since it started (None from a supervisor
    started by an earlier herder that does not count them)."""

    running: int
    exited: int
    logged_bytes: int | None


class _Pending:
    """A request awaiting its reply: only the thread that sent it is woken when it comes."""

    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] | None = None


class _Connection:
    """One connection to the supervisor, and the requests awaiting a reply over it."""

    def __init__(self, sock: socket.socket, supervisor_pid: int) -> None:
        self.sock = sock
        self.supervisor_pid = supervisor_pid
        self.alive = True
        self.replies: dict[int, _Pending] = {}  # by rid
        self.send_lock = threading.Lock()
        self.reader: threading.Thread | None = None


class Supervisor:
    """The supervisor of ``data_dir``, as one herder process talks to it. Thread-safe.

    ``session`` names this client in the supervisor (a fresh one by default).
    With ``keep`` true, the processes this client owns go on running when it
    disconnects without :meth:`close` (it was killed, say), for a later client
    to :meth:`attach`; with ``keep`` false the supervisor then stops them, and
    runs ``on_lost`` (``{"argv": [...], "env": {...}}``) once they have ended.
    """

    def __init__(self, data_dir: Path, *, session: str | None = None, keep: bool = True,
                 on_lost: Mapping[str, Any] | None = None) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.session = session or f"pid{os.getpid()}-{secrets.token_hex(4)}"
        self.keep = keep
        self.on_lost = dict(on_lost) if on_lost is not None else None
        self._conn: _Connection | None = None
        self._connect_lock = threading.Lock()
        # Guards the connections' state, _owners, _exits and _exited. Waiters sleep on
        # events of their own, so a reply or an exit wakes one thread, not every task's.
        self._lock = threading.Lock()
        self._rids = itertools.count(1)
        self._owners: dict[str, _Connection] = {}  # process id -> the connection it is watched through
        self._exits: dict[str, ExitInfo] = {}
        self._exited: dict[str, threading.Event] = {}  # set when the exit is in, or its connection is lost
        self._exit_callbacks: dict[str, list[Callable[[], None]]] = {}  # called at the same moments
        self._on_unsafe_log: dict[str, Callable[[str], None]] = {}  # process id -> who hears of planted log files
        self._on_logs_dropped: dict[str, Callable[[Dropped], None]] = {}  # process id -> who hears of lost output

    def __repr__(self) -> str:
        return f"<Supervisor {self.data_dir} session={self.session}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def pid(self) -> int:
        """The supervisor's process id (connecting first if need be)."""
        return self._connection().supervisor_pid

    def connect(self) -> None:
        """Connect now, starting the supervisor if none runs (otherwise the first call does).

        :raises SupervisorUnavailable: when no supervisor answers within :data:`CONNECT_TIMEOUT`.
        """
        self._connection()

    def spawn(self, id: str, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | str | None,
              user: str | None = None, groups: Sequence[int] = (), logs_dir: Path, task: str, max_files: int,
              max_file_size: int, stop_signal: int, kill_timeout: float, output_paths: Sequence[Path] | None = None,
              on_unsafe_log: Callable[[str], None] | None = None,
              on_logs_dropped: Callable[[Dropped], None] | None = None, netns: Path | str | None = None) -> ProcInfo:
        """Start ``argv`` as process ``id`` (unique in the supervisor), owned by this client.

        As ``user`` (with its groups, and the group ids ``groups`` besides) when given; in the
        network namespace at ``netns`` (a path ``setns(2)`` takes) when given.

        It leads its own process group, in a cgroup of its own where the
        supervisor has one to give; its stdout and stderr go to
        ``logs_dir/<task>.{stdout,stderr}.<n>``, rotated at ``max_file_size``
        MB, ``max_files`` kept. ``stop_signal`` and ``kill_timeout`` are how the
        supervisor stops it if this client goes away and ``keep`` is false.
        With ``output_paths`` (a stdout and a stderr file, FIFOs of another
        program's log collector, say) its output goes straight there instead.
        ``on_unsafe_log`` is called (in a thread of this client) with a message
        whenever the supervisor finds something the task planted at a log
        file's name (a link, say), which it removes without following it.
        ``on_logs_dropped`` is called likewise when the supervisor starts
        dropping output it cannot write (the disk is full, say), and with the
        count of bytes dropped when it stops.

        :raises SupervisorError: when it cannot start (no such command, bad
            ``cwd``, unknown user, ...), with the reason.
        """
        logs: dict[str, Any] = {"dir": str(logs_dir), "task": task, "max_files": max_files,
                                "max_file_size": max_file_size}
        if output_paths is not None:
            logs["paths"] = [str(path) for path in output_paths]
        self._listen_to_logs(id, on_unsafe_log, on_logs_dropped)  # before: the files are opened before the reply
        try:
            reply = self._request(
                "spawn", claim=id, id=id, argv=list(argv), env=dict(env), cwd=None if cwd is None else str(cwd),
                user=user or None, groups=list(groups), stop_signal=int(stop_signal),
                kill_timeout=float(kill_timeout), logs=logs, netns=None if netns is None else str(netns),
            )
        except SupervisorError:
            self._stop_listening_to_logs(id)
            raise
        return ProcInfo(id=id, pid=reply["pid"], start_time=reply["start_time"], cgroup=reply.get("cgroup"))

    def attach(self, id: str, on_unsafe_log: Callable[[str], None] | None = None,
               on_logs_dropped: Callable[[Dropped], None] | None = None) -> ProcInfo | None:
        """Take over process ``id`` (its exit is reported here from now on); None if unknown.

        ``on_unsafe_log``, ``on_logs_dropped``: as in :meth:`spawn` (None keeps the one given before, if any).
        """
        self._listen_to_logs(id, on_unsafe_log, on_logs_dropped)
        try:
            reply = self._request("attach", claim=id, id=id)
        except _UnknownProcess:
            return None
        info = ProcInfo(id=id, pid=reply["pid"], start_time=reply["start_time"], exit=_exit_info(reply["exit"]),
                        cgroup=reply.get("cgroup"))
        if info.exit is not None:
            with self._lock:
                self._exits[id] = info.exit
        return info

    def wait(self, id: str, timeout: float | None = None) -> ExitInfo | None:
        """How process ``id`` exited, once every byte of its output is in the log files.

        Blocks until then, or ``timeout`` seconds (then None). ``id`` must have
        been spawned or attached by this client.

        :raises SupervisorUnavailable: when the connection it was watched through broke.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                result = self._exits.get(id)
                if result is not None:
                    return result
                owner = self._owners.get(id)
                if owner is None:
                    raise SupervisorError(f"process {id} is not supervised through this client")
                if not owner.alive:
                    raise SupervisorUnavailable(f"lost the connection to the supervisor of {self.data_dir}")
                exited = self._exited.setdefault(id, threading.Event())
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            exited.wait(remaining)

    def on_exit(self, id: str, callback: Callable[[], None]) -> None:
        """Call ``callback`` once when :meth:`wait` for process ``id`` no longer blocks: it has
        exited, or the connection it is watched through is lost (then at once if so already).

        It is called from the connection's reader thread, which it must not hold up: it
        must not call the supervisor (hand the work to another thread). ``id`` must have
        been spawned or attached by this client.
        """
        with self._lock:
            owner = self._owners.get(id)
            now = id in self._exits or owner is None or not owner.alive
            if not now:
                self._exit_callbacks.setdefault(id, []).append(callback)
        if now:
            _call_back(callback, id)

    def signal(self, id: str, sig: int) -> None:
        """Send ``sig`` to process ``id`` and every process it started (nothing once it has exited)."""
        self._request("signal", id=id, signal=int(sig))

    def stop(self, id: str, sig: int, timeout: float) -> None:
        """Send ``sig`` to process ``id`` and all it started, and SIGKILL them after ``timeout`` seconds.

        Returns at once: :meth:`wait` tells when it has exited.
        """
        self._request("stop", id=id, signal=int(sig), timeout=float(timeout))

    def forget(self, id: str) -> None:
        """Drop the supervisor's record of process ``id``, which has exited."""
        self._request("forget", id=id)
        with self._lock:
            self._exits.pop(id, None)
            self._owners.pop(id, None)
            self._exited.pop(id, None)
            self._exit_callbacks.pop(id, None)
        self._stop_listening_to_logs(id)

    def list(self) -> list[ProcStatus]:
        """Every process the supervisor knows, running or exited and not forgotten."""
        return [
            ProcStatus(id=entry["id"], pid=entry["pid"], start_time=entry["start_time"], session=entry["session"],
                       running=entry["running"], exit=_exit_info(entry["exit"]))
            for entry in self._request("list")["procs"]
        ]

    def figures(self) -> Figures | None:
        """The supervisor's figures; None while this client is not connected (a supervisor is
        not started only to be asked this).

        :raises SupervisorUnavailable: the connection was lost meanwhile.
        """
        with self._lock:
            conn = self._conn if self._conn is not None and self._conn.alive else None
        if conn is None:
            return None
        reply = self._call(conn, "list")
        running = sum(bool(entry["running"]) for entry in reply["procs"])
        return Figures(running=running, exited=len(reply["procs"]) - running, logged_bytes=reply.get("logged_bytes"))

    def close(self) -> None:
        """Disconnect cleanly: this client's processes go on running, for a later client to attach.

        A later call connects again.
        """
        with self._connect_lock:
            with self._lock:
                conn, self._conn = self._conn, None
            if conn is None:
                return
            if conn.alive:
                with contextlib.suppress(SupervisorUnavailable):  # gone already: nothing to say goodbye to
                    self._call(conn, "bye")
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader
            if conn.reader is not None:
                conn.reader.join()  # which closes the socket

    def _listen_to_logs(self, id: str, on_unsafe_log: Callable[[str], None] | None,
                        on_logs_dropped: Callable[[Dropped], None] | None) -> None:
        with self._lock:
            if on_unsafe_log is not None:
                self._on_unsafe_log[id] = on_unsafe_log
            if on_logs_dropped is not None:
                self._on_logs_dropped[id] = on_logs_dropped

    def _stop_listening_to_logs(self, id: str) -> None:
        with self._lock:
            self._on_unsafe_log.pop(id, None)
            self._on_logs_dropped.pop(id, None)

    # -- the connection ---------------------------------------------------------------------------

    def _request(self, op: str, claim: str | None = None, **fields: Any) -> dict[str, Any]:
        return self._call(self._connection(), op, claim, **fields)

    def _call(self, conn: _Connection, op: str, claim: str | None = None, **fields: Any) -> dict[str, Any]:
        """Send a request and wait for its reply; on success, watch process ``claim`` through ``conn``."""
        pending = _Pending()
        with self._lock:
            rid = next(self._rids)
            conn.replies[rid] = pending
            if not conn.alive:
                pending.done.set()
        try:
            with conn.send_lock:
                conn.sock.sendall(encode({"op": op, "rid": rid, **fields}))
        except OSError:
            self._lost(conn)
        pending.done.wait()
        with self._lock:
            conn.replies.pop(rid, None)
            reply = pending.reply
            if reply is not None and reply.get("ok") and claim is not None:
                self._owners[claim] = conn
                self._exited.pop(claim, None)  # set, perhaps, when an earlier connection was lost
        if reply is None:
            raise SupervisorUnavailable(f"lost the connection to the supervisor of {self.data_dir}")
        if not reply.get("ok"):
            error = _UnknownProcess if reply.get("unknown") else SupervisorError
            raise error(str(reply.get("error")))
        return reply

    def _connection(self) -> _Connection:
        with self._lock:
            if self._conn is not None and self._conn.alive:
                return self._conn
        with self._connect_lock:
            with self._lock:
                if self._conn is not None and self._conn.alive:
                    return self._conn
            conn, pending = self._open()
            with self._lock:
                self._conn = conn
            conn.reader = threading.Thread(target=self._read, args=(conn, pending), daemon=True,
                                           name=f"supervisor-{self.session}")
            conn.reader.start()
            return conn

    def _open(self) -> tuple[_Connection, bytes]:
        """Connect and say hello, starting the supervisor if nothing listens.

        Returns the connection and what came after the reply to hello.
        """
        deadline = time.monotonic() + CONNECT_TIMEOUT
        while True:
            try:
                return self._dial(deadline)
            except Squatted as err:
                raise SupervisorUnavailable(f"cannot reach the supervisor of {self.data_dir}: {err}") from None
            except OSError as err:
                error = err
            if time.monotonic() >= deadline:
                raise SupervisorUnavailable(
                    f"cannot reach the supervisor of {self.data_dir}: {error} (see {log_path(self.data_dir)})"
                )
            if isinstance(error, (ConnectionRefusedError, FileNotFoundError)):  # nothing listens, or no socket
                self._launch(deadline)
            else:
                # The supervisor was exiting, idle, as we connected, or it is slow: try again.
                time.sleep(0.02)

    def _dial(self, deadline: float) -> tuple[_Connection, bytes]:
        """Connect and say hello.

        :raises Squatted: when a name of the supervisor is not this user's own (which no retry mends).
        """
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            dir_fd = open_state_dir(self.data_dir)
            try:
                check_socket_name(dir_fd, self.data_dir)
                sock.connect(socket_address(dir_fd))
            finally:
                os.close(dir_fd)
            _, uid, _ = peer_credentials(sock)
            if not peer_allowed(uid, os.geteuid()):
                raise SupervisorUnavailable(
                    f"the supervisor socket of {self.data_dir} is held by a process of uid {uid}"
                )
            sock.sendall(encode({"op": "hello", "rid": 0, "session": self.session, "keep": self.keep,
                                 "on_lost": self.on_lost}))
            received = bytearray()
            while (end := received.find(b"\n")) < 0:
                data = sock.recv(65536)
                if not data:
                    raise ConnectionResetError("the supervisor closed the connection")
                received += data
            reply = json.loads(received[:end])
            if not reply.get("ok"):
                raise SupervisorError(f"the supervisor of {self.data_dir} refused hello: {reply.get('error')}")
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        return _Connection(sock, reply["pid"]), bytes(received[end + 1 :])

    def _launch(self, deadline: float) -> None:
        """Start the supervisor; returns once it listens (or another one does)."""
        path = log_path(self.data_dir)  # its directory is there: _dial made it
        command = [sys.executable, "-m", "herder.supervisor", str(self.data_dir)]
        with path.open("ab") as output:
            try:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.PIPE,
                                      cwd="/", start_new_session=True,
                                      timeout=max(0.1, deadline - time.monotonic()), check=False)
            except subprocess.TimeoutExpired:
                raise SupervisorUnavailable(f"the supervisor of {self.data_dir} did not start in time") from None
            output.write(done.stderr)  # what it said goes to its log too
        if done.returncode:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            raise SupervisorUnavailable(
                f"the supervisor of {self.data_dir} did not start (exit status {done.returncode}): "
                f"{said[-1] if said else 'it said nothing'}; see {path}"
            )

    def _read(self, conn: _Connection, pending: bytes) -> None:
        """The reader thread: hand out replies and record exits until the connection ends."""
        received = bytearray(pending)
        try:
            while True:
                while (end := received.find(b"\n")) >= 0:
                    self._dispatch(conn, json.loads(received[:end]))
                    del received[: end + 1]
                data = conn.sock.recv(65536)
                if not data:
                    return
                received += data
        except (OSError, ValueError, LookupError, TypeError):  # a broken connection, or a garbled message
            return
        finally:
            self._lost(conn)
            conn.sock.close()

    def _dispatch(self, conn: _Connection, message: dict[str, Any]) -> None:
        event = message.get("event")
        if event in ("unsafe_log_file", "logs_dropped"):
            self._tell_about_logs(event, message)
            return
        callbacks: list[Callable[[], None]] = []
        with self._lock:
            if message.get("event") == "exit":
                id = message["id"]
                self._exits[id] = ExitInfo(exit_code=message["exit_code"], signal=message["signal"])
                self._exited.setdefault(id, threading.Event()).set()
                callbacks = self._exit_callbacks.pop(id, [])
            elif (pending := conn.replies.get(message.get("rid", -1))) is not None:
                pending.reply = message
                pending.done.set()
        for callback in callbacks:
            _call_back(callback, message["id"])

    def _tell_about_logs(self, event: str, message: dict[str, Any]) -> None:
        """Hand an event about a process's log files to whoever listens for it."""
        id = message["id"]
        with self._lock:
            unsafe, dropped = self._on_unsafe_log.get(id), self._on_logs_dropped.get(id)
        try:
            if event == "unsafe_log_file" and unsafe is not None:
                unsafe(str(message["message"]))
            elif event == "logs_dropped" and dropped is not None:
                dropped(Dropped(str(message["stream"]), str(message["message"]), message.get("bytes")))
        except Exception:  # the listener's bug must not end the connection
            log.exception("reporting %s of %s failed", event, id)

    def _lost(self, conn: _Connection) -> None:
        """Wake every thread waiting on ``conn``: for a reply, or for the exit of a process it watched."""
        callbacks: list[tuple[str, Callable[[], None]]] = []
        with self._lock:
            conn.alive = False
            for pending in conn.replies.values():
                pending.done.set()
            for id, owner in self._owners.items():
                if owner is conn:
                    self._exited.setdefault(id, threading.Event()).set()
                    callbacks.extend((id, callback) for callback in self._exit_callbacks.pop(id, []))
        for id, callback in callbacks:
            _call_back(callback, id)


def _call_back(callback: Callable[[], None], id: str) -> None:
    """Tell ``callback`` that process ``id`` may be waited for; its bug must not end the connection."""
    try:
        callback()
    except Exception:
        log.exception("the exit callback of %s failed", id)


def _exit_info(value: dict[str, int] | None) -> ExitInfo | None:
    return None if value is None else ExitInfo(exit_code=value["exit_code"], signal=value["signal"])
