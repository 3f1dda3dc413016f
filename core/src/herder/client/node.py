"""This host, as job files see it: ``${node.*}``, ``${attr.*}`` and ``${meta.*}``.

One :class:`Node` serves constraints, runtime interpolation, ``herder node``
and the Nomad API's node, so that what a job is checked against is what an
operator is shown.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from herder.client.config import Config
from herder.objects import Fingerprint

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "i686": "386", "armv7l": "arm"}

REGION = "global"
"""The one region herder's node is in (it has no servers to federate)."""
NOMAD_VERSION = "1.1.2"
"""The version of Nomad whose API herder speaks, which it gives as its own (``${attr.nomad.version}``)."""
NODE_POOL = "default"
"""Nomad 1.6's node pool: herder's node is in the default one."""
MHZ_PER_CORE = 1000
"""herder does not measure clock speeds: ``cpu.totalcompute`` counts 1000 MHz a core."""


@dataclass(frozen=True)
class Node:
    """The node's identity and its attributes (host and healthy drivers), as Nomad's ``structs.Node``."""

    name: str
    datacenter: str
    attributes: Mapping[str, str]
    id: str = ""
    node_class: str = ""
    meta: Mapping[str, str] = field(default_factory=dict)
    region: str = REGION

    def target(self, reference: str) -> str | None:
        """The value of ``reference`` (``node.datacenter``, ``attr.cpu.arch``, ``meta.rack``: a
        constraint's or an interpolation's name inside ``${}``), None when the node has none."""
        if reference.startswith("attr."):
            return self.attributes.get(reference.removeprefix("attr."))
        if reference.startswith("meta."):
            return self.meta.get(reference.removeprefix("meta."))
        return {"node.unique.id": self.id, "node.unique.name": self.name, "node.datacenter": self.datacenter,
                "node.class": self.node_class, "node.region": self.region, "node.pool": NODE_POOL}.get(reference)


def node_of(config: Config, fingerprints: Mapping[str, Fingerprint]) -> Node:
    """The node of ``config`` with the drivers' latest ``fingerprints``: the host's attributes,
    ``driver.NAME`` ("1") and the attributes of every healthy driver, and the node's name, class
    and meta from the configuration."""
    attributes = host_attributes()
    for driver, fingerprint in fingerprints.items():
        if fingerprint.detected and fingerprint.healthy:
            attributes[f"driver.{driver}"] = "1"
            attributes.update(fingerprint.attributes)
    # unique.hostname is the node's name, which is the host's unless configured otherwise; the
    # tasks' ports are bound on the address the node gives as its own.
    attributes |= {"nomad.version": NOMAD_VERSION, "unique.hostname": config.node_name,
                   "unique.network.ip-address": config.ports.host_ip}
    return Node(name=config.node_name, datacenter=config.datacenter, attributes=attributes,
                id=node_id(config.node_name, config.data_dir), node_class=config.client.node_class,
                meta=dict(config.client.meta))


def host_attributes() -> dict[str, str]:
    """Nomad's basic node attributes (``kernel.name``, ``cpu.arch``, ``os.name``, ...)."""
    uname = os.uname()
    attributes = {
        "kernel.name": uname.sysname.lower(),
        "kernel.version": uname.release,
        "cpu.arch": _ARCH.get(uname.machine, uname.machine),
        "cpu.numcores": str(os.cpu_count() or 1),
        "cpu.totalcompute": str((os.cpu_count() or 1) * MHZ_PER_CORE),
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
