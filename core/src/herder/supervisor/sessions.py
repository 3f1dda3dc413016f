"""The supervisor's clients: their connections, the sessions they say hello as, and sessions lost.

A connection is accepted only from the supervisor's own user or root, and
reads requests one line at a time, handing each to the RPC dispatch
(:mod:`herder.supervisor.dispatch`). A client that goes away without ``bye``
disowns its processes; if its session asked not to ``keep`` them, they are
stopped, and its ``on_lost`` command runs once they have all ended.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import functools
import logging
import os
import selectors
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder.supervisor.loop import Loop
from herder.supervisor.processes import Proc, Processes
from herder.supervisor.protocol import encode, log_path, peer_allowed, peer_credentials

log = logging.getLogger("herder.supervisor")

MAX_LINE = 16 * 1024 * 1024
"""The longest request accepted; a client sending more is disconnected."""

REFUSAL_LOG_BURST = 5
"""How many refused connections are logged one by one in :data:`REFUSAL_LOG_INTERVAL`; the rest are counted."""

REFUSAL_LOG_INTERVAL = 60
"""Seconds: the refused connections beyond the first :data:`REFUSAL_LOG_BURST` are logged as one count per interval."""


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


class Conn:
    """A client connection, and the session it said hello as: the owner of the processes it spawns."""

    __slots__ = ("_handler", "_loop", "closed", "inbuf", "keep", "on_lost", "outbuf", "said_bye", "session",
                 "sock")

    def __init__(self, sock: socket.socket, loop: Loop, on_events: Callable[[Conn, int], None]) -> None:
        """Watch ``sock`` (nonblocking) in ``loop``, which calls ``on_events`` with this and the events."""
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.session: str | None = None
        self.keep = True
        self.on_lost: dict[str, Any] | None = None
        self.said_bye = False
        self.closed = False
        self._loop = loop
        self._handler = functools.partial(on_events, self)
        loop.register(sock, selectors.EVENT_READ, self._handler)

    def send(self, message: dict[str, Any]) -> None:
        """Send a reply or an event, now or as soon as the client takes it: the supervisor never waits."""
        if self.closed:
            return
        self.outbuf += encode(message)
        self.flush()

    def flush(self) -> None:
        """Send what the socket takes now; watch it for room to send the rest."""
        try:
            sent = self.sock.send(self.outbuf, socket.MSG_NOSIGNAL)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            # The client is gone; reading its end of input disconnects it.
            self.outbuf.clear()
            sent = 0
        del self.outbuf[:sent]
        self._loop.modify(self.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if self.outbuf else 0),
                          self._handler)

    def close(self) -> None:
        self.closed = True
        self._loop.unregister(self.sock)
        self.sock.close()


class Lost:
    """A ``keep: false`` session that went away without ``bye``, until its processes have ended."""

    __slots__ = ("on_lost", "session", "waiting")

    def __init__(self, session: str, on_lost: dict[str, Any] | None, waiting: set[str]) -> None:
        self.session = session
        self.on_lost = on_lost
        self.waiting = waiting


class Sessions:
    """The connections of the supervisor's clients, accepted on ``listener``.

    Each complete line a client sends goes to ``handle``.
    """

    def __init__(self, loop: Loop, listener: socket.socket, procs: Processes, data_dir: Path,
                 handle: Callable[[Conn, bytes], None]) -> None:
        self.conns: set[Conn] = set()
        self._loop = loop
        self._listener = listener
        self._procs = procs
        self._data_dir = data_dir
        self._handle = handle
        self._lost: dict[str, Lost] = {}  # by the id of a process being stopped
        self._refusals = Refusals()
        self._uid = os.geteuid()
        loop.register(listener, selectors.EVENT_READ, self._accept)

    def close(self) -> None:
        """Log the refusals not logged yet: the supervisor exits."""
        self._summarize_refusals()

    def _accept(self, _events: int) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        pid, uid, _ = peer_credentials(sock)
        if not peer_allowed(uid, self._uid):
            sock.close()
            if self._refusals.note(time.monotonic()):
                log.warning("refused a connection from pid %d of uid %d", pid, uid)
            elif self._refusals.hidden == 1:  # the first one left out: its summary is due at the interval's end
                self._loop.call_later(self._refusals.remaining(time.monotonic()), self._summarize_refusals)
            return
        sock.setblocking(False)
        self.conns.add(Conn(sock, self._loop, self._on_conn))

    def _summarize_refusals(self) -> None:
        hidden = self._refusals.take_hidden()
        if hidden:
            log.warning("refused %d more connection(s) in the last %d s (not logged one by one)",
                        hidden, REFUSAL_LOG_INTERVAL)

    def _on_conn(self, conn: Conn, events: int) -> None:
        if conn.closed:
            return
        if events & selectors.EVENT_WRITE:
            conn.flush()
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

    def _disconnected(self, conn: Conn) -> None:
        """The client went away: disown its processes, and stop them if its session asked for that."""
        conn.close()
        self.conns.discard(conn)
        owned = self._procs.disown(conn)
        # A session with nothing of its own here may still have asked for on_lost: its tasks
        # may be containers or VMs, which its on_lost command cleans up.
        if (owned or conn.on_lost) and conn.session is not None and not conn.said_bye and not conn.keep:
            self._lose(conn.session, conn.on_lost, owned)

    def _lose(self, session: str, on_lost: dict[str, Any] | None, owned: list[Proc]) -> None:
        """Stop the processes of a lost session; run its ``on_lost`` once they have all ended.

        Nobody will come back for their exits, so their records go as soon as
        the exits are in (unless a client attaches meanwhile).
        """
        lost = Lost(session, on_lost, {proc.id for proc in owned if proc.exit is None})
        log.warning("session %s went away; stopping its %d process(es)", session, len(lost.waiting))
        for proc in owned:
            if proc.exit is not None:
                self._procs.forget(proc)
                continue
            self._lost[proc.id] = lost
            self._procs.stop(proc, proc.stop_signal, proc.kill_timeout)
        if not lost.waiting:
            self._run_on_lost(lost)

    def process_ended(self, proc: Proc) -> None:
        """``proc``'s exit is published: if its session was lost, its record goes, and perhaps ``on_lost`` runs."""
        lost = self._lost.pop(proc.id, None)
        if lost is None:
            return
        lost.waiting.discard(proc.id)
        if proc.owner is None:
            self._procs.forget(proc)
        if not lost.waiting:
            self._run_on_lost(lost)

    def _run_on_lost(self, lost: Lost) -> None:
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
        self._loop.register(pidfd, selectors.EVENT_READ, functools.partial(self._reap_helper, helper, pidfd))

    def _reap_helper(self, helper: subprocess.Popen[bytes], pidfd: int, _events: int) -> None:
        if helper.returncode is not None or helper.poll() is None:
            return  # reaped already (a stale event), or not ended yet
        self._loop.unregister(pidfd)
        os.close(pidfd)
        if helper.returncode:
            log.warning("on_lost %s ended with status %d", helper.args, helper.returncode)
