"""This host, as job files see it: ``${node.*}`` and ``${attr.*}``."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm"}


@dataclass(frozen=True)
class Node:
    """The node's name and datacenter, and its attributes (host and drivers)."""

    name: str
    datacenter: str
    attributes: Mapping[str, str]


def host_attributes() -> dict[str, str]:
    """Nomad's basic node attributes (``kernel.name``, ``cpu.arch``, ``os.name``, ...)."""
    uname = os.uname()
    attributes = {
        "kernel.name": uname.sysname.lower(),
        "kernel.version": uname.release,
        "cpu.arch": _ARCH.get(uname.machine, uname.machine),
        "cpu.numcores": str(os.cpu_count() or 1),
        "unique.hostname": uname.nodename,
        "memory.totalbytes": str(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
    }
    release = _os_release()
    if "ID" in release:
        attributes["os.name"] = release["ID"]
    if "VERSION_ID" in release:
        attributes["os.version"] = release["VERSION_ID"]
    return attributes


def _os_release() -> dict[str, str]:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key: value.strip().strip('"') for key, value in pairs}


def node_id(name: str, data_dir: Path | str) -> str:
    """The node's ID, Nomad's UUID: the same agent on the same data dir is the same node."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"herder:{name}:{data_dir}"))
