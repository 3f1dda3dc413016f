"""Where templates read keys and services: small interfaces, and their Consul implementations.

The template functions ``key``, ``keyOrDefault``, ``keyExists`` read a
:class:`KeyValueStore`; ``service`` and ``services`` read a
:class:`ServiceCatalog`. The client gives the templates plugin the ones of
its services backend: with ``services.backend = "consul"``, Consul's KV store
and health API over HTTP (:class:`ConsulKV`, :class:`ConsulCatalog`); with
the local backend, no KV store (a ``key`` waits, saying why) and the embedded
registry's catalog (:class:`LocalCatalog`). ``nomadService`` and
``nomadServices`` read the embedded registry whatever the backend, as
Nomad's native discovery (:class:`NativeCatalog`).
"""

from __future__ import annotations

import base64
import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from herder.services import PASSING
from herder.services.local import LocalRegistry
from herder.services.native import NativeServices, choose


@dataclass(frozen=True)
class ServiceEntry:
    """One healthy instance of a service, with consul-template's field names."""

    Name: str
    ID: str
    Address: str
    Port: int
    Tags: tuple[str, ...] = ()
    ServiceMeta: dict[str, str] = field(default_factory=dict)
    Node: str = ""
    NodeAddress: str = ""
    Status: str = "passing"


@dataclass(frozen=True)
class CatalogService:
    """A service name and the union of its instances' tags (``services``)."""

    Name: str
    Tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class NomadService:
    """One instance of a native service, with consul-template's field names (``nomadService``)."""

    ID: str
    Name: str
    Node: str
    Address: str
    Port: int
    Datacenter: str
    Tags: tuple[str, ...]
    JobID: str
    AllocID: str


class KeyValueStore(Protocol):
    description: str

    def get(self, key: str) -> str | None:
        """The value of ``key``; None when there is no such key."""


class ServiceCatalog(Protocol):
    description: str

    def service(self, name: str, tag: str = "") -> list[ServiceEntry]:
        """The healthy instances of ``name`` (with ``tag``), in a stable order."""

    def services(self) -> list[CatalogService]:
        """Every service, by name."""


class SourceError(Exception):
    """A store or catalog cannot be reached; templates wait and try again."""


class NoKeyValueStore:
    """The local backend has no key/value store: every key is missing."""

    description = "no key/value store (services.backend is local)"

    def get(self, key: str) -> str | None:
        return None


class EmptyCatalog:
    """A catalog with no services."""

    description = "no service registry"

    def service(self, name: str, tag: str = "") -> list[ServiceEntry]:
        return []

    def services(self) -> list[CatalogService]:
        return []


class LocalCatalog:
    """The embedded registry's services: an instance is healthy when every check it has passes."""

    description = "the local service registry"

    def __init__(self, registry: LocalRegistry) -> None:
        self.registry = registry

    def service(self, name: str, tag: str = "") -> list[ServiceEntry]:
        found = [
            ServiceEntry(Name=service.name, ID=service.id, Address=service.address, Port=service.port,
                         Tags=service.tags, ServiceMeta=dict(service.meta))
            for service, statuses in self.registry.instances()
            if service.name == name and (not tag or tag in service.tags)
            and all(status.status == PASSING for status in statuses)
        ]
        return sorted(found, key=lambda entry: entry.ID)

    def services(self) -> list[CatalogService]:
        tags: dict[str, set[str]] = {}
        for service, _ in self.registry.instances():
            tags.setdefault(service.name, set()).update(service.tags)
        return [CatalogService(Name=name, Tags=tuple(sorted(found))) for name, found in sorted(tags.items())]


class _Consul:
    def __init__(self, address: str = "127.0.0.1:8500", token: str = "", timeout: float = 5.0) -> None:
        base = address if "://" in address else f"http://{address}"
        headers = {"X-Consul-Token": token} if token else {}
        self.http = httpx.Client(base_url=base, headers=headers, timeout=timeout)
        self.description = f"Consul at {base}"

    def get_json(self, path: str, params: dict[str, str] | None = None) -> Any:
        try:
            response = self.http.get(path, params=params)
        except httpx.HTTPError as exc:
            raise SourceError(f"{self.description}: {exc}") from None
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise SourceError(f"{self.description}: {path}: HTTP {response.status_code} {response.text.strip()}")
        return response.json()

    def close(self) -> None:
        self.http.close()


class ConsulKV(_Consul):
    """Consul's KV store (``/v1/kv/KEY``)."""

    def get(self, key: str) -> str | None:
        entries = self.get_json(f"/v1/kv/{key.lstrip('/')}")
        if not entries:
            return None
        value = entries[0].get("Value")
        return base64.b64decode(value).decode("utf-8", "replace") if value else ""


class ConsulCatalog(_Consul):
    """Consul's health API: the passing instances of a service, and the catalog's services."""

    def service(self, name: str, tag: str = "") -> list[ServiceEntry]:
        params = {"passing": "1"} | ({"tag": tag} if tag else {})
        entries = self.get_json(f"/v1/health/service/{name}", params) or []
        found = [
            ServiceEntry(
                Name=entry["Service"]["Service"], ID=entry["Service"]["ID"],
                Address=entry["Service"].get("Address") or entry["Node"].get("Address", ""),
                Port=int(entry["Service"].get("Port", 0)), Tags=tuple(entry["Service"].get("Tags") or ()),
                ServiceMeta=dict(entry["Service"].get("Meta") or {}), Node=entry["Node"].get("Node", ""),
                NodeAddress=entry["Node"].get("Address", ""),
            )
            for entry in entries
        ]
        return sorted(found, key=lambda e: (e.Node, e.ID))

    def services(self) -> list[CatalogService]:
        catalog = self.get_json("/v1/catalog/services") or {}
        return [CatalogService(Name=name, Tags=tuple(sorted(tags or ()))) for name, tags in sorted(catalog.items())]


NATIVE_MEMO_SIZE = 4096
"""How many answers of ``nomadService`` the native catalog keeps for the registry's current index."""


class NativeCatalog:
    """The native services (``provider = "nomad"``), as consul-template's Nomad functions read them.

    Each answer is kept until the registry changes: the template watcher asks every read of every
    template again at each poll, and a rendezvous choice hashes each instance with its key (of any
    length the render made), work the render's CPU bound paid for once and the watcher must not redo.
    """

    description = "the native service registry"

    def __init__(self, native: NativeServices) -> None:
        self.native = native
        self._lock = threading.Lock()
        self._memo_index = -1
        self._memo: dict[bytes, tuple[NomadService, ...]] = {}

    def service(self, name: str, tag: str = "", count: int = 0, key: str = "") -> list[NomadService]:
        """Every instance of ``name`` (with ``tag``), healthy or not as in Nomad; with a ``key``,
        the ``count`` instances rendezvous hashing ranks first for it."""
        # The index first: never an answer older than it. The question by its digest: the memo holds no
        # copy of a name or a key of any length the render made, 4096 of them.
        index = self.native.index
        asked = hashlib.sha256(repr((name, tag, count, key)).encode()).digest()
        with self._lock:
            kept = self._memo.get(asked) if self._memo_index == index else None
        if kept is not None:
            return list(kept)
        found = self.native.registrations(name)
        if key:
            found = choose(found, count, key)
        answer = tuple(NomadService(ID=r.ID, Name=r.ServiceName, Node=r.NodeID, Address=r.Address, Port=r.Port,
                                    Datacenter=r.Datacenter, Tags=tuple(sorted(r.Tags)), JobID=r.JobID,
                                    AllocID=r.AllocID)
                       for r in found if not tag or tag in r.Tags)
        with self._lock:
            if self._memo_index != index or len(self._memo) >= NATIVE_MEMO_SIZE:
                self._memo_index, self._memo = index, {}
            self._memo[asked] = answer
        return list(answer)

    def services(self) -> list[CatalogService]:
        return [CatalogService(Name=name, Tags=tags) for name, tags in self.native.names()]
