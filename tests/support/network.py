"""What the network tests need: root, ``ip``, the standard CNI plugins; and the checks that nothing is left."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.require import require

CNI_DIRS = (Path("/opt/cni/bin"), Path("/usr/lib/cni"))
"""Where the standard CNI plugins are installed: Nomad's default, then Debian's package's."""

CNI_PLUGINS = ("bridge", "host-local", "portmap", "firewall", "loopback")


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
