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


class NativeServices:
    """The embedded ``registry`` of the node ``node_id`` in ``datacenter``, in Nomad's shapes."""

    def __init__(self, registry: LocalRegistry, node_id: str, datacenter: str) -> None:
        self.registry = registry
        self.node_id = node_id
        self.datacenter = datacenter

    @property
    def index(self) -> int:
        """Raised by every change of the services held: what a blocking query waits on."""
        return self.registry.index

    def registrations(self, name: str | None = None) -> list[Registration]:
        """Every instance (of the service ``name``), by ID, as Nomad orders them."""
        return [
            Registration(ID=record.service.id, ServiceName=record.service.name, Namespace=NAMESPACE,
                         NodeID=self.node_id, Datacenter=self.datacenter, JobID=record.service.job_id,
                         AllocID=record.service.alloc_id, Tags=record.service.tags,
                         Address=record.service.address, Port=record.service.port,
                         CreateIndex=record.create_index, ModifyIndex=record.modify_index)
            for record in self.registry.records()
            if record.service.alloc_id and (name is None or record.service.name == name)
        ]

    def names(self) -> list[tuple[str, tuple[str, ...]]]:
        """Every service name, sorted, with the union of its instances' tags (sorted)."""
        tags: dict[str, set[str]] = {}
        for registration in self.registrations():
            tags.setdefault(registration.ServiceName, set()).update(registration.Tags)
        return [(name, tuple(sorted(found))) for name, found in sorted(tags.items())]


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
