"""A Unix socket in an allocation's directory that relays to a TCP address on the host.

A task in its allocation's network namespace cannot reach a Consul agent that
listens on the host's loopback; a socket file in the shared ``alloc/tmp``
reaches it from any namespace, as Nomad's ``consul_http_sock_hook`` does. The
socket is bound through a descriptor of that directory (which a task can
write), so a link a task planted on the way is never followed; whatever a task
left under the socket's name is removed first.

One thread per relay accepts and moves bytes with a selector, never blocking
on a client: what a side sends is read only once its peer took the last chunk
(at most one chunk waits per direction), so a client that never reads holds up
only its own connection, and a stop ends the thread at once. A side's end of
input is passed on to the other, and a connection is closed once both ended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import threading
from pathlib import Path

from herder.sdk import safefs

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
MAX_CONNECTIONS = 32
"""More at once are refused: the relay serves a proxy's few long polls, not a crowd."""
CONNECT_TIMEOUT = 5.0


class ConnectionBudget:
    """How many connections the relays sharing it may hold to their targets at once, all together.

    Every relayed connection reaches its target from the host's own address, as
    the agent's and other local programs' do; a target that limits each address
    (Consul's ``limits.http_max_conns_per_client``, 200) would refuse them all
    once the relays of a few allocations filled it.
    """

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._lock = threading.Lock()

    def take(self) -> bool:
        """One connection more, if the budget has room."""
        with self._lock:
            if self._free <= 0:
                return False
            self._free -= 1
            return True

    def give(self, count: int = 1) -> None:
        with self._lock:
            self._free += count


class UnixRelay:
    """Relay connections to ``directory/name`` on to ``target`` (host, port) until :meth:`close`,
    at most :data:`MAX_CONNECTIONS` of them and as many as ``budget`` (shared with other relays) allows."""

    def __init__(self, directory: Path, name: str, target: tuple[str, int],
                 budget: ConnectionBudget | None = None) -> None:
        self.directory, self.name, self.target = directory, name, target
        self._budget = budget or ConnectionBudget(MAX_CONNECTIONS)
        self._dir_fd = safefs.open_root(directory)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _unlink(self._dir_fd, name)
            # Bound beneath the directory's descriptor: no component of the path is looked up again.
            self._listener.bind(f"/proc/self/fd/{self._dir_fd}/{name}")
            self._listener.listen(16)
            self._listener.setblocking(False)
        except BaseException:
            self._listener.close()
            os.close(self._dir_fd)
            raise
        self._wake_r, self._wake_w = os.pipe()
        self._peers: dict[socket.socket, socket.socket] = {}
        self._pending: dict[socket.socket, bytes] = {}
        """What a socket's peer sent that it has not taken yet (one chunk at most)."""
        self._ended: set[socket.socket] = set()
        """Sockets whose input ended, while their peer still sends."""
        self._thread = threading.Thread(target=self._run, name=f"relay-{name}", daemon=True)
        self._thread.start()

    @property
    def path(self) -> Path:
        return self.directory / self.name

    def close(self) -> None:
        """Stop relaying, close every connection and remove the socket file."""
        os.write(self._wake_w, b"x")
        self._thread.join()
        _unlink(self._dir_fd, self.name)
        for fd in (self._dir_fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            try:
                while True:
                    for key, events in selector.select():
                        if key.fileobj == self._wake_r:
                            return
                        if key.fileobj is self._listener:
                            self._accept(selector)
                            continue
                        sock: socket.socket = key.fileobj  # type: ignore[assignment]
                        if sock in self._peers and events & selectors.EVENT_WRITE:
                            self._flush(selector, sock)
                        if sock in self._peers and events & selectors.EVENT_READ:
                            self._read(selector, sock)
            finally:
                for sock in list(self._peers):
                    sock.close()
                self._budget.give(len(self._peers) // 2)
                self._peers.clear()
                self._pending.clear()
                self._listener.close()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if len(self._peers) >= 2 * MAX_CONNECTIONS or not self._budget.take():
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            log.warning("relay %s: cannot reach %s:%d: %s", self.path, *self.target, exc)
            self._budget.give()
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
        self._peers[client], self._peers[upstream] = upstream, client
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)

    def _read(self, selector: selectors.BaseSelector, source: socket.socket) -> None:
        """Pass on what ``source`` has to its peer; what the peer cannot take now waits for it, and
        ``source`` is not read again before it took that. Its end of input shuts the peer's writing half."""
        peer = self._peers[source]
        try:
            data = source.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            self._drop(selector, source)
            return
        if not data:
            self._ended.add(source)
        else:
            self._pending[peer] = data
        self._flush(selector, peer)

    def _flush(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        """Send ``sock`` what waits for it, then watch each side of the connection for what it can do
        now; once both sides ended and nothing waits, the connection is closed."""
        peer = self._peers[sock]
        pending = self._pending.pop(sock, b"")
        try:
            sent = sock.send(pending) if pending else 0
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop(selector, sock)
            return
        if pending[sent:]:
            self._pending[sock] = pending[sent:]
        elif peer in self._ended:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
            if sock in self._ended and peer not in self._pending:
                self._drop(selector, sock)
                return
        for side in (sock, peer):
            self._watch(selector, side)

    def _watch(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        """Watch ``sock`` for input while its peer has nothing waiting, and for room while it has."""
        events = 0
        if sock not in self._ended and self._peers[sock] not in self._pending:
            events |= selectors.EVENT_READ
        if sock in self._pending:
            events |= selectors.EVENT_WRITE
        registered = sock in selector.get_map()
        if events and registered:
            selector.modify(sock, events)
        elif events:
            selector.register(sock, events)
        elif registered:
            selector.unregister(sock)

    def _drop(self, selector: selectors.BaseSelector, sock: socket.socket) -> None:
        """Close ``sock``'s connection, both sides."""
        self._budget.give()
        for side in (sock, self._peers[sock]):
            if side in selector.get_map():
                selector.unregister(side)
            self._peers.pop(side, None)
            self._pending.pop(side, None)
            self._ended.discard(side)
            side.close()


def _unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
