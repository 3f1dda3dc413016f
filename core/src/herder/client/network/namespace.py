"""Network namespaces of herder's own: bind mounts under ``/var/run/netns``, made as ``ip netns add`` makes them
(or, for a namespace a driver made, as ``ip netns attach`` names one).

``ip`` (iproute2) makes the mount point shared and private as it must be for a
namespace to outlive the process that made it, and to be removed without a
leftover mount; doing that by hand would repeat it, less tested.
"""

from __future__ import annotations

import ipaddress
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from herder.client.network.cni import CniError

NETNS_DIR = Path("/var/run/netns")
PREFIX = "herder-"
"""The names of herder's namespaces: ``herder-<allocation id>``."""

IP_TIMEOUT = 30.0


def namespace_name(alloc_id: str) -> str:
    return f"{PREFIX}{alloc_id}"


def namespace_path(alloc_id: str) -> Path:
    return NETNS_DIR / namespace_name(alloc_id)


def create(alloc_id: str) -> Path:
    """Make the allocation's namespace (its loopback is brought up by the CNI loopback plugin).

    :raises CniError: when ``ip`` cannot make it, with what it said.
    """
    _ip("netns", "add", namespace_name(alloc_id))
    return namespace_path(alloc_id)


def remove(alloc_id: str) -> None:
    """Remove the allocation's namespace, if it is there: its interfaces (the inside end of a veth pair,
    and with it the outside end) go with it once no process is left in it."""
    if os.path.lexists(namespace_path(alloc_id)):
        _ip("netns", "delete", namespace_name(alloc_id))


def exists(alloc_id: str) -> bool:
    return os.path.lexists(namespace_path(alloc_id))


def pin(alloc_id: str, source: Path) -> Path:
    """Give a namespace a driver made (``/proc/<pid>/ns/net`` of a pause container) the allocation's
    name, a bind mount of herder's own, as ``ip netns attach`` does: that path names the allocation's
    namespace for as long as it is mounted, whereas the driver's names whatever process has the pid
    (once the pause container died: a process of the host's network, or of another allocation's).

    :raises CniError: when it cannot be mounted.
    """
    target = namespace_path(alloc_id)
    remove(alloc_id)  # what a herder killed between this and the record's removal left
    try:
        NETNS_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o444))
    except OSError as err:
        raise CniError(f"cannot make {target}: {err.strerror}") from None
    try:
        _run(["mount", "--bind", str(source), str(target)])
    except CniError:
        os.unlink(target)
        raise
    return target


def stand_in(alloc_id: str, ifname: str, addresses: Iterable[str]) -> Path:
    """A namespace of herder's own at the allocation's name (whatever was there is removed first)
    holding only an interface ``ifname`` with ``addresses`` (``172.26.64.5/20``): where the CNI
    plugins' DEL runs when the allocation's own namespace is gone or cannot be trusted to be the
    allocation's. The plugins find there what they release by the interface (the bridge plugin its
    masquerading rules, by the interface's address), and touch nothing of anyone else's.

    :raises CniError: when ``ip`` cannot make it (an address that is none is left out).
    """
    remove(alloc_id)
    create(alloc_id)
    name = namespace_name(alloc_id)
    # Both ends of a veth pair inside: a link of any type does, and veth needs no module of its own.
    _ip("-n", name, "link", "add", ifname, "type", "veth", "peer", "name", f"{ifname}-peer")
    for address in addresses:
        try:
            interface = ipaddress.ip_interface(address)
        except ValueError:
            continue
        _ip("-n", name, "addr", "add", str(interface), "dev", ifname)
    return namespace_path(alloc_id)


def _ip(*args: str) -> None:
    _run(["ip", *args])


def _run(argv: list[str]) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=IP_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CniError(f"cannot run {' '.join(argv)}: {err}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:500]
        raise CniError(f"{' '.join(argv)} failed: {said or f'exit code {done.returncode}'}")
