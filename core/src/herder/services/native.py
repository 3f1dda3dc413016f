"""Native service discovery: the embedded registry as Nomad's own (``provider = "nomad"``) shows it.

Nomad 1.3 keeps the services of ``provider = "nomad"`` in its servers and
answers ``/v1/services`` and ``/v1/service/NAME`` with them; consul-template's
``nomadService`` and ``nomadServices`` read those. herder's embedded registry
(:class:`herder.services.local.LocalRegistry`) holds them here, and this
view gives them Nomad's shapes: a registration per service instance (every
one, whatever its checks say, as Nomad's), and a listing of names with
their tags. The agent's own service (no allocation) is not a workload's and
is left out, as Nomad keeps its own in Consul only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from herder.services.local import LocalRegistry

NAMESPACE = "default"
"""herder has one namespace, Nomad's default."""
REGION = "global"
"""herder is one region, Nomad's default."""


@dataclass(frozen=True)
class Registration:
    """One service instance, Nomad's ``ServiceRegistration`` field for field."""

    ID: str
    ServiceName: str
    Namespace: str
    NodeID: str
    Datacenter: str
    JobID: str
    AllocID: str
    Tags: tuple[str, ...]
    Address: str
    Port: int
    CreateIndex: int
    ModifyIndex: int

    def hash_with(self, key: str) -> str:
        """Nomad's ``ServiceRegistration.HashWith``: this instance's rank for ``key`` in a rendezvous choice."""
        digest = hashlib.sha256(self.Port.to_bytes(8, "big", signed=False))
        for part in (self.AllocID, self.ID, self.Namespace, self.Address, self.ServiceName, *self.Tags, key):
            digest.update(part.encode())
        return digest.hexdigest()


@dataclass(frozen=True)
class _Snapshot:
    """The registrations at one index of the registry, by name, and the listing of names."""

    index: int
    by_name: dict[str, tuple[Registration, ...]]
    names: tuple[tuple[str, tuple[str, ...]], ...]


class NativeServices:
    """The embedded ``registry`` of the node ``node_id`` in ``datacenter``, in Nomad's shapes.

    The shapes are made once per change of the registry and kept until the next: a template walking
    every service (``nomadService`` for each of ``nomadServices``) and the watcher comparing each of its
    reads every poll would otherwise go through the whole registry once per name read.
    """

    def __init__(self, registry: LocalRegistry, node_id: str, datacenter: str) -> None:
        self.registry = registry
        self.node_id = node_id
        self.datacenter = datacenter
        self._snapshot = _Snapshot(-1, {}, ())

    @property
    def index(self) -> int:
        """Raised by every change of the services held: what a blocking query waits on."""
        return self.registry.index

    def _current(self) -> _Snapshot:
        # The index is read before the records: a change between the two leaves a snapshot newer than
        # its index says, made again at the next read, never one older.
        index = self.registry.index
        snapshot = self._snapshot
        if snapshot.index == index:
            return snapshot
        by_name: dict[str, list[Registration]] = {}
        for record in self.registry.records():
            if record.service.alloc_id:
                by_name.setdefault(record.service.name, []).append(Registration(
                    ID=record.service.id, ServiceName=record.service.name, Namespace=NAMESPACE,
                    NodeID=self.node_id, Datacenter=self.datacenter, JobID=record.service.job_id,
                    AllocID=record.service.alloc_id, Tags=record.service.tags, Address=record.service.address,
                    Port=record.service.port, CreateIndex=record.create_index, ModifyIndex=record.modify_index))
        names = tuple((name, tuple(sorted({tag for r in found for tag in r.Tags})))
                      for name, found in sorted(by_name.items()))
        snapshot = _Snapshot(index, {name: tuple(found) for name, found in by_name.items()}, names)
        self._snapshot = snapshot  # one assignment: a concurrent reader sees the old or the new whole
        return snapshot

    def registrations(self, name: str | None = None) -> list[Registration]:
        """Every instance (of the service ``name``), by ID, as Nomad orders them."""
        by_name = self._current().by_name
        if name is not None:
            return list(by_name.get(name, ()))
        return sorted((r for found in by_name.values() for r in found), key=lambda r: r.ID)

    def names(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every service name, sorted, with the union of its instances' tags (sorted)."""
        return list(self._current().names)


def choose(registrations: list[Registration], count: int, key: str) -> list[Registration]:
    """Nomad's ``?choose=COUNT|KEY``: the ``count`` instances ranked first for ``key`` by
    rendezvous hashing, so that each asker (its allocation ID the key) gets a stable subset."""
    ranked = sorted(registrations, key=lambda registration: registration.hash_with(key))
    return ranked[:max(count, 0)]


def parse_choose(parameter: str) -> tuple[int, str]:
    """``COUNT|KEY``, as Nomad reads it.

    :raises ValueError: Nomad's message.
    """
    count, separator, key = parameter.partition("|")
    if not separator or not key or not count.isascii() or not count.isdigit():
        raise ValueError("Parameter for choose must be in form '<number>|<key>'")
    return int(count), key
