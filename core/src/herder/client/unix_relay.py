"""A Unix socket in an allocation's directory that relays to a TCP address on the host.

A task in its allocation's network namespace cannot reach a Consul agent that
listens on the host's loopback; a socket file in the shared ``alloc/tmp``
reaches it from any namespace, as Nomad's ``consul_http_sock_hook`` does. The
socket is bound through a descriptor of that directory (which a task can
write), so a link a task planted on the way is never followed; whatever a task
left under the socket's name is removed first.

One thread per relay accepts and moves bytes with a selector; a side's end of
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
MAX_CONNECTIONS = 64
"""More at once are refused: the relay serves a proxy's few long polls, not a crowd."""
CONNECT_TIMEOUT = 5.0


class UnixRelay:
    """Relay connections to ``directory/name`` on to ``target`` (host, port) until :meth:`close`."""

    def __init__(self, directory: Path, name: str, target: tuple[str, int]) -> None:
        self.directory, self.name, self.target = directory, name, target
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
        self._ended: set[socket.socket] = set()
        """Sockets whose input ended (no longer watched), while their peer still sends."""
        self._thread = threading.Thread(target=self._run, name=f"relay-{name}", daemon=True)
        self._thread.start()

    @property
    def path(self) -> Path:
        return self.directory / self.name

    def close(self) -> None:
        """Stop relaying, close every connection and remove the socket file."""
        os.write(self._wake_w, b"x")
        self._thread.join(10)
        _unlink(self._dir_fd, self.name)
        for fd in (self._dir_fd, self._wake_r, self._wake_w):
            os.close(fd)

    def _run(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            try:
                while True:
                    for key, _ in selector.select():
                        if key.fileobj == self._wake_r:
                            return
                        if key.fileobj is self._listener:
                            self._accept(selector)
                        else:
                            self._move(selector, key.fileobj)  # type: ignore[arg-type]
            finally:
                for sock in list(self._peers):
                    sock.close()
                self._peers.clear()
                self._listener.close()

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if len(self._peers) >= 2 * MAX_CONNECTIONS:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=CONNECT_TIMEOUT)
        except OSError as exc:
            log.warning("relay %s: cannot reach %s:%d: %s", self.path, *self.target, exc)
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(True)
            sock.settimeout(None)
        self._peers[client], self._peers[upstream] = upstream, client
        selector.register(client, selectors.EVENT_READ)
        selector.register(upstream, selectors.EVENT_READ)

    def _move(self, selector: selectors.BaseSelector, source: socket.socket) -> None:
        """Move what ``source`` has to its peer. Its end of input is passed on (the peer's
        writing half is shut); once both sides ended, or on an error, both are closed."""
        peer = self._peers.get(source)
        if peer is None:
            return
        try:
            data = source.recv(CHUNK)
            if data:
                peer.sendall(data)
                return
            selector.unregister(source)
            self._ended.add(source)
            peer.shutdown(socket.SHUT_WR)
            if peer not in self._ended:
                return
        except OSError:
            pass
        for sock in (source, peer):
            if sock not in self._ended:
                selector.unregister(sock)
            self._ended.discard(sock)
            self._peers.pop(sock, None)
            sock.close()


def _unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)
