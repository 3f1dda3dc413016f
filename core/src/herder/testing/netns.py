"""The kit's allocation network: a network namespace, as a group with ``network { mode = "bridge" }`` has one.

The driver under test makes it, through its ``herder_alloc_network_create``,
when it implements the hook (docker's pause container); otherwise the kit
makes a bare namespace with ``ip netns add``, with its loopback up, which
is all the contract needs: the task's processes must be inside it, where
``127.0.0.1`` is the namespace's own. No CNI plugin is involved: a driver
is tested for joining a namespace, not for herder's setup of its interfaces.

:func:`listening` opens a TCP server inside a namespace, without moving the
test's own thread there.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from herder.objects import Alloc, AllocNetwork
from herder.plugins.hooks import Hooks
from herder.supervisor.netns import NamespaceError, entered

MODE = "bridge"
"""The mode of the kit's allocation network, as the job file would name it."""
NETNS_DIR = Path("/var/run/netns")
"""Where ``ip netns add NAME`` binds the namespace it makes."""
NAME_PREFIX = "conformance-"
"""The names of the kit's namespaces, a random suffix after it."""
IP_TIMEOUT = 30.0
"""How long an ``ip`` command may take."""


class NetworkUnavailable(Exception):
    """The kit cannot make a namespace here (no ``ip``, not root): the tests that need one skip, saying why."""


@dataclass
class KitNetwork:
    """An allocation's namespace the kit made, and how to remove it (idempotent)."""

    network: AllocNetwork
    remove: Callable[[], None]


def create(hooks: Hooks, alloc: Alloc) -> KitNetwork:
    """The namespace of ``alloc``: the driver's (``herder_alloc_network_create``), else one of the kit's.

    :raises NetworkUnavailable: no driver makes one, and ``ip netns`` cannot either.
    :raises Exception: what the driver's hook raised.
    """
    made = hooks.alloc_network_create(alloc, "")
    if made is not None:
        driver, isolation = made
        once = _Once(lambda: hooks.alloc_network_destroy(driver, alloc, isolation))
        return KitNetwork(AllocNetwork(mode=MODE, path=isolation.path, labels=dict(isolation.labels)), once)
    ip = shutil.which("ip")
    if ip is None:
        raise NetworkUnavailable("the kit makes network namespaces with `ip netns add`, and `ip` (iproute2) "
                                 "is not on PATH")
    # Not herder's own prefix (``herder-<alloc id>``): a herder starting meanwhile, which removes the
    # namespaces of allocations it no longer knows, must not take the kit's for one.
    name = f"{NAME_PREFIX}{secrets.token_hex(6)}"
    _ip(ip, "netns", "add", name)
    remove = _Once(lambda: _ip(ip, "netns", "delete", name))
    try:
        _ip(ip, "-n", name, "link", "set", "lo", "up")
    except BaseException:
        remove()
        raise
    return KitNetwork(AllocNetwork(mode=MODE, path=NETNS_DIR / name), remove)


def _ip(ip: str, *args: str) -> None:
    """:raises NetworkUnavailable: ``ip ARGS`` failed (without root, say), with its message."""
    try:
        done = subprocess.run([ip, *args], capture_output=True, text=True, timeout=IP_TIMEOUT,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkUnavailable(f"`ip {' '.join(args)}`: {exc}") from exc
    if done.returncode != 0:
        raise NetworkUnavailable(f"`ip {' '.join(args)}` failed: {done.stderr.strip() or done.returncode}")


class _Once:
    """``call``, the first time only: removing a namespace twice is removing it once."""

    def __init__(self, call: Callable[[], None]) -> None:
        self._call: Callable[[], None] | None = call
        self._lock = threading.Lock()

    def __call__(self) -> None:
        with self._lock:
            call, self._call = self._call, None
        if call is not None:
            call()


@contextlib.contextmanager
def listening(path: Path, port: int) -> Iterator[socket.socket]:
    """A TCP server on ``127.0.0.1:port`` inside the network namespace at ``path``, closed on leaving.

    A socket belongs to the namespace of the thread that made it: a short-lived
    thread enters the namespace, makes it and comes back; the socket can then
    be used from any thread.

    :raises NamespaceError: the namespace cannot be entered.
    :raises OSError: the port cannot be bound.
    """
    made: list[socket.socket] = []
    failed: list[BaseException] = []

    def make() -> None:
        try:
            with entered(path):
                made.append(socket.create_server(("127.0.0.1", port)))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=make, name=f"herder.testing: listen in {path}", daemon=True)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    with made[0] as server:
        yield server


def accepted(server: socket.socket, timeout: float) -> bool:
    """Whether a connection to ``server`` arrived within ``timeout`` seconds (0: already); it is closed at once."""
    server.settimeout(timeout)
    try:
        connection, _ = server.accept()
    except (TimeoutError, BlockingIOError):
        return False
    connection.close()
    return True


__all__ = ["KitNetwork", "NamespaceError", "NetworkUnavailable", "accepted", "create", "listening"]
