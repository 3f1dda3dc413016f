"""Network namespaces of herder's own: bind mounts under ``/var/run/netns``, made as ``ip netns add`` makes them.

``ip`` (iproute2) makes the mount point shared and private as it must be for a
namespace to outlive the process that made it, and to be removed without a
leftover mount; doing that by hand would repeat it, less tested.
"""

from __future__ import annotations

import os
import subprocess
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
    _ip("add", namespace_name(alloc_id))
    return namespace_path(alloc_id)


def remove(alloc_id: str) -> None:
    """Remove the allocation's namespace, if it is there: its interfaces (the inside end of a veth pair,
    and with it the outside end) go with it once no process is left in it."""
    if os.path.lexists(namespace_path(alloc_id)):
        _ip("delete", namespace_name(alloc_id))


def exists(alloc_id: str) -> bool:
    return os.path.lexists(namespace_path(alloc_id))


def _ip(command: str, name: str) -> None:
    try:
        done = subprocess.run(["ip", "netns", command, name], capture_output=True, timeout=IP_TIMEOUT,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise CniError(f"cannot run ip netns {command} {name}: {err}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[:500]
        raise CniError(f"ip netns {command} {name} failed: {said or f'exit code {done.returncode}'}")
