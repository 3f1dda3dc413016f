"""The allocations' network namespaces (SPEC §19): herder's CNI runner, Nomad's bridge network, and
the manager that makes them before an allocation's tasks start and removes them after."""

from __future__ import annotations

from herder.client.network.cni import CniError
from herder.client.network.manager import AllocNetworks

__all__ = ["AllocNetworks", "CniError"]
