"""What the network tests need: root, ``ip``, the standard CNI plugins; and the checks that nothing is left."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

from tests.support.require import require

CNI_DIRS = (Path("/opt/cni/bin"), Path("/usr/lib/cni"))
"""Where the standard CNI plugins are installed: Nomad's default, then Debian's package's."""

CNI_PLUGINS = ("bridge", "host-local", "portmap", "firewall", "loopback")

LEASES = Path("/var/run/cni")
"""Where host-local keeps the leases of herder's bridge network (Nomad's place), a directory a network."""


def cni_dir() -> Path | None:
    """The first directory that holds every plugin of Nomad's bridge network, if any."""
    for path in CNI_DIRS:
        if all(os.access(path / plugin, os.X_OK) for plugin in CNI_PLUGINS):
            return path
    return None


def require_networking() -> None:
    """Root, ``ip`` and ``iptables``, and the standard CNI plugins (containernetworking-plugins): else skip,
    or fail when ``HERDER_REQUIRE`` names ``cni``."""
    require("cni", os.geteuid() == 0, "network namespaces and CNI need root")
    require("cni", shutil.which("ip") is not None and shutil.which("iptables") is not None,
            "ip and iptables are not installed")
    require("cni", cni_dir() is not None,
            f"the CNI plugins {', '.join(CNI_PLUGINS)} are not in {' or '.join(map(str, CNI_DIRS))}"
            " (Debian: containernetworking-plugins)")


def host_veth(alloc_id: str) -> str | None:
    """The host's end of the veth pair of allocation ``alloc_id``'s ``eth0``, while its namespace exists."""
    done = subprocess.run(["ip", "netns", "exec", f"herder-{alloc_id}", "cat", "/sys/class/net/eth0/iflink"],
                          capture_output=True, text=True, timeout=30, check=False)
    if done.returncode != 0:
        return None
    index = done.stdout.strip()
    for entry in Path("/sys/class/net").iterdir():
        with contextlib.suppress(OSError):
            if (entry / "ifindex").read_text().strip() == index:
                return entry.name
    return None


def leftovers(alloc_id: str, veths: Iterable[str] = (), lease_dirs: Iterable[Path] = (LEASES,)) -> list[str]:
    """What of allocation ``alloc_id``'s network is still there: its namespace, an iptables rule naming it
    (the firewall and portmap plugins' comments do), a host-local lease, one of ``veths``."""
    found = []
    if os.path.lexists(f"/var/run/netns/herder-{alloc_id}"):
        found.append(f"namespace herder-{alloc_id}")
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True, timeout=30, check=True).stdout
    found += [f"iptables: {line}" for line in rules.splitlines() if alloc_id in line]
    for directory in lease_dirs:
        for lease in directory.glob("*/*") if directory.exists() else ():
            with contextlib.suppress(OSError):
                if lease.is_file() and alloc_id in lease.read_text(errors="replace"):
                    found.append(f"lease {lease}")
    found += [f"interface {veth}" for veth in veths if Path("/sys/class/net", veth).exists()]
    return found


def remove_leftovers(alloc_id: str) -> None:
    """After a failed test: remove what it left, so that the next tests start clean."""
    subprocess.run(["ip", "netns", "delete", f"herder-{alloc_id}"], capture_output=True, timeout=30, check=False)
