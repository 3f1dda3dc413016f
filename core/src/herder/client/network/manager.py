"""The allocations' network namespaces: made before their tasks start, removed after they are dead.

An allocation of a group whose network mode is ``bridge``, ``none`` or
``cni/NAME`` gets a namespace: one a driver of the allocation makes
(``herder_alloc_network_create``: docker's pause container), else herder's own
(``/var/run/netns/herder-<alloc id>``; a driver's is given that name too, a
bind mount that keeps naming it whatever becomes of the driver's own path).
The CNI plugins attach it (ADD, with the allocation's port mappings), and
detach it (DEL) at the allocation's end, before the namespace is removed.

Each step is recorded in the state database before it is taken, so that a
herder killed at any instant leaves a record of what it made: the next one
removes the networks of allocations that are over (:meth:`AllocNetworks.remove_stale`),
finishes or undoes a half-made one, and reuses a reattached allocation's.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from herder.client.config import ClientConfig
from herder.client.env import ALLOC_INTERFACE as IFNAME
from herder.client.network import namespace
from herder.client.network.bridge import bridge_conflist, ensure_forwarding, none_conflist
from herder.client.network.cni import (
    Attachment,
    Cni,
    CniError,
    ConfList,
    PortMapping,
    first_address,
    mappings_for,
    result_dns,
)
from herder.context import AllocatedPort
from herder.model import GroupNetwork
from herder.objects import Alloc, AllocNetwork, NetworkIsolation
from herder.plugins.hooks import Hooks
from herder.state import NetworkRecord, Store

log = logging.getLogger(__name__)


class AllocNetworks:
    """Makes, finds again and removes the allocations' network namespaces on one data dir."""

    def __init__(self, config: ClientConfig, store: Store, hooks: Hooks) -> None:
        self.config = config
        self.store = store
        self.hooks = hooks
        self.cni = Cni(config.cni_path)
        self._forwarding = threading.Lock()  # one admin chain rule, however many allocations start at once
        self._forwarding_ready = False  # checked once a process: three iptables runs an allocation cost ~0.1 s

    def conflist(self, mode: str) -> ConfList:
        """The CNI configuration list of a network mode.

        :raises CniError: for ``cni/NAME`` when the operator's directory has no ``NAME``.
        """
        if mode == "bridge":
            return bridge_conflist(self.config.bridge_network_name, self.config.bridge_network_subnet)
        if mode == "none":
            return none_conflist()
        return ConfList.load(self.config.cni_config_dir, mode.removeprefix("cni/"))

    def attach(self, alloc: Alloc, network: GroupNetwork, ports: Sequence[AllocatedPort],
               hostname: str) -> AllocNetwork:
        """The allocation's namespace, attached: the one recorded for it if it is complete (an
        allocation reattached after a restart), else a new one (a half-made one is removed first).

        :raises CniError: when it cannot be made; nothing of it is left then.
        Raises whatever a driver's ``herder_alloc_network_create`` raised.
        """
        record = self.store.network(alloc.id)
        if record is not None and record.result is not None and namespace.exists(alloc.id):
            return self._alloc_network(record, network, hostname)
        if record is not None:  # half-made, or half-removed, by a herder that was killed
            self.remove(record, alloc)
        conflist = self.conflist(network.mode)
        mappings = mappings_for((port.value, port.to or port.value, port.host_ip) for port in ports)
        made = self.hooks.alloc_network_create(alloc, hostname, network.dns)
        driver, isolation = made if made is not None else ("", None)
        path = isolation.path if isolation is not None else namespace.namespace_path(alloc.id)
        record = NetworkRecord(alloc_id=alloc.id, mode=network.mode, path=str(path), driver=driver,
                               labels=dict(isolation.labels) if isolation is not None else {},
                               conflist=conflist.to_json(),
                               port_mappings=[mapping.as_runtime_config() for mapping in mappings],
                               created_at=time.time())
        self.store.put_network(record)  # before the namespace exists: a crash from here on leaves its record
        try:
            if driver:
                namespace.pin(alloc.id, path)  # the path every task and plugin is given
            else:
                namespace.create(alloc.id)
            if network.mode == "bridge":
                with self._forwarding:
                    if not self._forwarding_ready:
                        ensure_forwarding(self.config.bridge_network_name, self.config.bridge_network_subnet)
                        self._forwarding_ready = True
            result = self.cni.add(conflist, Attachment(alloc.id, namespace.namespace_path(alloc.id), IFNAME,
                                                       mappings))
        except BaseException:
            try:
                self.remove(record, alloc)
            except Exception as exc:  # the record stays: the next herder removes what is left
                log.warning("cannot remove the half-made network of allocation %s: %s", alloc.id, exc)
            raise
        record = dataclasses.replace(record, result=result)
        self.store.put_network(record)
        return self._alloc_network(record, network, hostname)

    def detach(self, alloc: Alloc) -> None:
        """Remove the allocation's namespace, once its tasks are dead (nothing when it has none)."""
        record = self.store.network(alloc.id)
        if record is not None:
            self.remove(record, alloc)

    def remove_stale(self) -> list[str]:
        """Remove the networks of the allocations that are over, or gone from the state database
        (what a herder killed between an allocation's end and its network's removal left); the
        ids of those removed."""
        removed = []
        for record in self.store.stale_networks():
            alloc = self._alloc_of(record)
            try:
                self.remove(record, alloc)
            except Exception as exc:
                log.warning("cannot remove the network namespace of allocation %s: %s", record.alloc_id, exc)
                continue
            removed.append(record.alloc_id)
        return removed

    def remove(self, record: NetworkRecord, alloc: Alloc) -> None:
        """Detach (CNI DEL, every plugin even if one fails), remove the namespace, forget the record.

        A plugin that fails is logged: the namespace is removed all the same, and with it its
        interfaces; the record goes once the namespace is gone.

        :raises CniError: when the namespace cannot be removed (the record stays, for the next try).
        """
        try:
            conflist = ConfList.from_json(record.conflist, f"the stored network of allocation {record.alloc_id}")
        except CniError as exc:
            log.warning("%s", exc)
        else:
            mappings = tuple(PortMapping(host_port=int(m["hostPort"]), container_port=int(m["containerPort"]),
                                         protocol=str(m.get("protocol", "tcp")), host_ip=str(m.get("hostIP", "")))
                             for m in record.port_mappings)
            netns = namespace.namespace_path(record.alloc_id)
            if not namespace.exists(record.alloc_id):
                # Gone (a reboot), or a driver's never pinned (a herder killed before it was): never the
                # driver's path, /proc/<pid>/ns/net of a pause container that may have died, its pid since
                # taken by a process of the host's own network or another allocation's, whose loopback
                # DEL would take down and whose eth0 it would delete. The plugins run in a stand-in.
                netns = namespace.stand_in(record.alloc_id, IFNAME, _addresses(record.result))
            attachment = Attachment(record.alloc_id, netns, IFNAME, mappings)
            for failure in self.cni.delete(conflist, attachment, record.result, strict=False):
                log.warning("allocation %s: %s", record.alloc_id, failure)
        if record.driver:
            self.hooks.alloc_network_destroy(record.driver, alloc,
                                             NetworkIsolation(path=Path(record.path), labels=dict(record.labels)))
        namespace.remove(record.alloc_id)  # herder's own, a driver's pinned, or the stand-in
        self.store.remove_network(record.alloc_id)

    def _alloc_network(self, record: NetworkRecord, network: GroupNetwork, hostname: str) -> AllocNetwork:
        # The job's dns block wins over what the plugins say, as in Nomad.
        dns = network.dns or result_dns(record.result or {})
        return AllocNetwork(mode=record.mode, path=namespace.namespace_path(record.alloc_id),
                            ip=first_address(record.result or {}), hostname=hostname, dns=dns,
                            labels=dict(record.labels))

    def _alloc_of(self, record: NetworkRecord) -> Alloc:
        """The allocation of a stale network, as far as the state database still knows it (a driver
        that made the namespace is told which allocation's it removes)."""
        stored = self.store.alloc(record.alloc_id)
        if stored is None:
            return Alloc(id=record.alloc_id, name=record.alloc_id, index=0, job_name="", group_name="",
                         dir=Path(), tasks=[])
        return Alloc(id=stored.id, name=stored.name, index=stored.index, job_name=stored.job_name,
                     group_name=stored.group_name, dir=stored.dir, tasks=[])


def _addresses(result: dict[str, Any] | None) -> list[str]:
    """The allocation's addresses in a CNI result (``172.26.64.5/20``)."""
    listed = (result or {}).get("ips")
    if not isinstance(listed, list):
        return []
    return [str(ip["address"]) for ip in listed if isinstance(ip, dict) and "address" in ip]
