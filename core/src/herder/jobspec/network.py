"""A group's ``network`` block beyond its ports: its mode, hostname and DNS (SPEC §19)."""

from __future__ import annotations

from typing import Any

from herder.model import HOST_NETWORK, GroupNetwork, NetworkDNS


def group_network(spec: dict[str, Any]) -> GroupNetwork:
    """The group network of a checked ``network`` block (host networking when there is none)."""
    block = spec.get("dns") or {}
    dns = NetworkDNS(servers=tuple(map(str, block.get("servers", []))),
                     searches=tuple(map(str, block.get("searches", []))),
                     options=tuple(map(str, block.get("options", []))))
    return GroupNetwork(mode=str(spec.get("mode") or HOST_NETWORK), hostname=str(spec.get("hostname", "")),
                        dns=dns if dns != NetworkDNS() else None)  # an empty block changes nothing
