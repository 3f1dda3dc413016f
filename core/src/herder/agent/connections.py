"""How many clients the agent holds, and for how long one may take to ask: the defence against floods.

A connection costs the agent a file descriptor from the moment it is accepted, whether or not its
client ever sends a request; the descriptors also hold the task logs, the state database and the
supervisor's socket. Left alone, a few thousand connections that send nothing (any local user, and
any page's scripts, can open them) exhaust the descriptors: the agent can accept nothing, and
asyncio logs a traceback for each accept that fails. So:

- at start the soft ``RLIMIT_NOFILE`` is raised to the hard one (:func:`raise_descriptor_limit`), and
  the descriptors are shared out (:func:`budget`): a reserve for everything else, the rest split
  between the listeners, each of which accepts in bursts of at most ``backlog`` connections;
- a connection *waits* while it has sent no complete request headers: before its first request, and
  between two requests on a kept-alive connection. One that waits with part of a request for
  :data:`HEADER_TIMEOUT` is closed (an idle kept-alive one has uvicorn's own, longer, timeout);
- a connection also waits while its request's body is incomplete, and is closed if the body takes
  more than :data:`BODY_TIMEOUT` after the headers: a body is read before the token is checked on
  the web UI's routes (its sign-in form), and a body left unread after a refusal is still received,
  so a body that never ends, sent without any credential, would otherwise hold a connection for ever
  as "busy" and, a few thousand times over, leave every new client a 503;
- when a listener holds its limit of connections, a new one closes the oldest waiting connection
  rather than being refused: a flood of connections that send nothing cannot lock out a client that
  asks at once, since the flood's oldest make room for it. Only when every connection is busy with a
  request is the new one refused (a 503);
- one address (an IPv6 /64) may hold at most half of a listener's limit waiting; beyond that its own
  oldest waiting connection is closed. This bounds a remote client, but on loopback every local user
  is 127.0.0.1: there, closing the oldest waiting connections is what protects;
- what is dropped, refused, fails to be accepted or is not HTTP is counted, and logged as one line
  per reason and per :data:`REPORT_INTERVAL` (:class:`Tally`), never a line per connection.

The bounds apply to plain HTTP: over TLS, a connection reaches the protocol only once its handshake
is done, and asyncio closes one whose handshake takes a minute.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import resource
import time
from collections import Counter
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("herder.agent")

HEADER_TIMEOUT = 10.0
"""Seconds a connection may take to send a request's headers, from its start or from a request's first byte."""
BODY_TIMEOUT = 30.0
"""Seconds a request may take to send its body (at most 4 MiB; a job file is a few KiB) after its headers."""
REPORT_INTERVAL = 60.0
"""Seconds between two log lines about connections dropped for one reason."""
RESERVE_SHARE = 4
"""One descriptor in this many (and at least :data:`MIN_RESERVE`) is kept from connections."""
MIN_RESERVE = 64
BACKLOG = 128
"""Connections a listener queues in the kernel, and accepts at most in one go."""
PEER_SHARE = 2
"""An address may hold at most one connection in this many of a listener's waiting."""

HEADERS, BODY, BUSY = "headers", "body", "busy"
"""What a connection waits for: a request's headers (before its first request, between two), the rest of its
body (whether or not the request was answered already), or nothing (a request is being answered)."""

_REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"content-length: 21\r\nconnection: close\r\n\r\ntoo many connections\n")


def raise_descriptor_limit() -> int:
    """Raise the soft limit of open files to the hard one; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # a hard limit of "unlimited" is beyond what the kernel allows
            log.warning("cannot raise the open files limit from %d to %d: %s", soft, hard, exc)
    log.info("open files limit %d", soft)
    return soft


def budget(descriptors: int, listeners: int) -> tuple[int, int]:
    """Each of ``listeners``' limit of connections and its ``backlog``, out of ``descriptors``."""
    share = (descriptors - max(MIN_RESERVE, descriptors // RESERVE_SHARE)) // listeners
    backlog = max(1, min(BACKLOG, share // 4))
    return max(1, share - backlog), backlog


class Tally:
    """Connections dropped, by reason: each reason logged at most once per :data:`REPORT_INTERVAL`,
    the first time soon after it happens (once the event loop has taken in the burst it belongs to)."""

    def __init__(self, interval: float = REPORT_INTERVAL) -> None:
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.since: dict[str, float] = {}
        self.reported: dict[str, float] = {}
        self.scheduled: dict[str, asyncio.TimerHandle] = {}

    def add(self, reason: str) -> None:
        now = time.monotonic()
        self.since.setdefault(reason, now)
        self.counts[reason] += 1
        if reason not in self.scheduled:
            delay = max(0.0, self.reported.get(reason, now - self.interval) + self.interval - now)
            self.scheduled[reason] = asyncio.get_running_loop().call_later(delay, self.report, reason)

    def report(self, reason: str | None = None) -> None:
        """Log what was counted for ``reason`` (every reason when the agent stops), and count it again."""
        now = time.monotonic()
        for each in [reason] if reason is not None else sorted(self.counts):
            if (handle := self.scheduled.pop(each, None)) is not None:
                handle.cancel()
            if count := self.counts.pop(each, 0):
                log.warning("dropped %d connection(s) in the last %.1f s: %s", count, now - self.since.pop(each),
                            each)
            self.reported[each] = now

    def filter(self, record: logging.LogRecord) -> bool:
        """A filter of uvicorn's log: its warning for each request that is not HTTP is counted instead."""
        if record.msg == "Invalid HTTP request received.":
            self.add("not an HTTP request (answered 400)")
            return False
        return True

    def exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The event loop's: an accept that fails for want of descriptors (which asyncio logs with
        a traceback, once per connection it could not accept) is counted instead."""
        exc = context.get("exception")
        if context.get("message") == "socket.accept() out of system resource" and isinstance(exc, OSError):
            self.add(f"not accepted: {exc.strerror}")
        else:
            loop.default_exception_handler(context)


def _peer(client: tuple[str, int] | None) -> str:
    """Whom a connection counts against: its address, an IPv6 one by its /64."""
    host = client[0] if client else ""
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


class Limits:
    """One listener's bounds, and its connections waiting for request headers, oldest first."""

    def __init__(self, connections: int, tally: Tally) -> None:
        self.connections = connections
        self.per_peer = max(1, connections // PEER_SHARE)
        self.tally = tally
        self.waiting: dict[BoundedHttpProtocol, None] = {}
        self.by_peer: dict[str, dict[BoundedHttpProtocol, None]] = {}

    def admit(self, new: BoundedHttpProtocol) -> bool:
        """Make room for ``new``, just accepted: close the oldest waiting connection when the listener
        is full, or ``new`` itself (a 503) when none waits. Whether ``new`` stays."""
        if len(new.connections) <= self.connections:
            return True
        oldest = next(iter(self.waiting), None)
        if oldest is not None:
            self.drop(oldest, "at the connection limit, the oldest waiting for request headers")
            return True
        new.transport.write(_REFUSAL)
        self.drop(new, "at the connection limit with every connection busy")
        return False

    def wait(self, connection: BoundedHttpProtocol) -> None:
        """``connection`` waits for request headers from now (if it did not already): it goes last."""
        if connection in self.waiting:
            return
        self.waiting[connection] = None
        same = self.by_peer.setdefault(connection.peer, {})
        same[connection] = None
        if len(same) > self.per_peer:
            self.drop(next(iter(same)), "too many waiting for request headers from one address")

    def busy(self, connection: BoundedHttpProtocol) -> None:
        """``connection`` no longer waits: it has a request, or is gone."""
        if connection in self.waiting:
            del self.waiting[connection]
            same = self.by_peer[connection.peer]
            del same[connection]
            if not same:
                del self.by_peer[connection.peer]

    def drop(self, connection: BoundedHttpProtocol, reason: str) -> None:
        """Close ``connection`` now, and stop counting it (its descriptor is closed on the loop's next turn)."""
        self.tally.add(reason)
        connection.close()


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools', a C parser: the pure-Python h11 was an eighth of the time
    of a small request) under a listener's :class:`Limits` (see :func:`protocol`)."""

    limits: ClassVar[Limits]
    peer = ""
    phase = HEADERS
    body_done = False
    """Whether the current request's body has all come (its message is complete)."""
    timer: asyncio.TimerHandle | None = None
    timed: str | None = None
    """The phase the timer runs for: :data:`HEADERS` or :data:`BODY`."""
    upgraded = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.peer = _peer(self.client)
        if self.limits.admit(self):
            self.track()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self.track()

    # The parser's callbacks, during data_received: the phase follows the request.
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.phase, self.body_done = HEADERS, False

    def on_headers_complete(self) -> None:
        self.phase = BODY
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        answered = self.cycle is not None and self.cycle.response_complete
        super().on_message_complete()
        self.body_done = True
        self.phase = HEADERS if answered else BUSY

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.phase = HEADERS if self.body_done else BODY
        self.track()

    def handle_websocket_upgrade(self) -> None:
        # The WebSocket's protocol takes the connection over: this one hears of it no more.
        self.upgraded = True
        self.close_timer()
        self.limits.busy(self)
        super().handle_websocket_upgrade()

    def connection_lost(self, exc: Exception | None) -> None:
        self.close_timer()
        self.limits.busy(self)
        super().connection_lost(exc)

    def track(self) -> None:
        """Whether the connection waits for a request's headers or body now, and since when; its timer."""
        if self.upgraded:
            return
        phase = self.phase
        if self.transport.is_closing() or phase == BUSY:
            self.close_timer()
            self.limits.busy(self)
            return
        self.limits.wait(self)
        if self.timed != phase:
            self.close_timer()  # the headers are in: the body's own time starts (or a new request's)
        if phase == BODY:
            self.arm(phase, BODY_TIMEOUT, "no complete request body")
        elif self.timeout_keep_alive_task is not None:
            self.close_timer()  # idle between requests: uvicorn's keep-alive timeout applies
        else:
            self.arm(phase, HEADER_TIMEOUT, "no complete request headers")

    def arm(self, phase: str, seconds: float, what: str) -> None:
        """Close the connection unless it leaves ``phase`` within ``seconds`` (from the first call)."""
        if self.timer is None:
            self.timed = phase
            self.timer = self.loop.call_later(seconds, self.timeout, f"{what} within {seconds:g} s")

    def timeout(self, reason: str) -> None:
        self.timer = None
        self.limits.drop(self, reason)

    def close_timer(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.timed = None

    def close(self) -> None:
        self.close_timer()
        self.limits.busy(self)
        self.connections.discard(self)
        self.transport.close()


def protocol(limits: Limits) -> type[BoundedHttpProtocol]:
    """The HTTP protocol class of a listener bound by ``limits`` (uvicorn.Config's ``http``)."""
    return type("BoundedHttpProtocol", (BoundedHttpProtocol,), {"limits": limits})
