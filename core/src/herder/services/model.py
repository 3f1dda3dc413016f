"""What herder registers: services, their checks, and the checks' health.

These are the registry's own terms, independent of job files: the services
plugin turns a task's ``service`` blocks into :class:`ServiceRegistration` s,
and a :class:`Backend` keeps a registry (the embedded one, Consul) in line
with them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Protocol

PASSING, WARNING, CRITICAL = "passing", "warning", "critical"

SERVICE_PREFIX = "_herder-"
"""Every service herder registers has an ID starting with this: what the sync
loop may remove when no live task wants it."""

SCRIPT_TTL_GRACE = 31.0
"""A script check's TTL is its interval plus this (Nomad's value): long enough
that one slow run does not expire it."""

OUTPUT_LIMIT = 4096
"""At most this many bytes of a script check's output become its note."""


@dataclass(frozen=True)
class CheckRegistration:
    """One health check of a registered service.

    ``kind`` is what the registry runs: ``http``, ``tcp`` and ``grpc`` are run
    by the registry; ``ttl`` is the form of a ``script`` check, whose results
    herder reports itself.
    """

    id: str
    name: str
    kind: str  # http | tcp | grpc | ttl
    interval: float = 10.0
    timeout: float = 2.0
    target: str = ""
    """The URL (http), ``host:port`` (tcp, grpc)."""
    method: str = "GET"
    header: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tls_skip_verify: bool = False
    grpc_use_tls: bool = False
    ttl: float = 0.0
    initial_status: str = ""


@dataclass(frozen=True)
class UpstreamRegistration:
    """A service of the mesh a proxy listens for on ``local_bind_address:local_bind_port``."""

    destination_name: str
    local_bind_port: int
    local_bind_address: str = "127.0.0.1"
    datacenter: str = ""


@dataclass(frozen=True)
class ExposedPath:
    """A path of the proxied service the proxy serves in the clear on ``listener_port``."""

    path: str
    protocol: str
    local_path_port: int
    listener_port: int


@dataclass(frozen=True)
class ProxyRegistration:
    """What makes a registration a Connect sidecar proxy (Consul's ``Kind: connect-proxy``):
    the service instance it fronts and where that listens, and its upstreams."""

    destination_name: str
    destination_id: str
    local_service_address: str
    local_service_port: int
    upstreams: tuple[UpstreamRegistration, ...] = ()
    expose: tuple[ExposedPath, ...] = ()
    config: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class ServiceRegistration:
    """One service instance, as registered: a plain service, a Connect sidecar proxy
    (``proxy``), or a service that speaks Connect itself (``connect_native``)."""

    id: str
    name: str
    address: str
    port: int
    tags: tuple[str, ...] = ()
    meta: Mapping[str, str] = field(default_factory=dict)
    checks: tuple[CheckRegistration, ...] = ()
    job_id: str = ""
    alloc_id: str = ""
    """The job and allocation that registered it (empty for the agent's own service): what
    the embedded registry shows, as Nomad's native registrations do. Implied by ``id``."""
    proxy: ProxyRegistration | None = None
    connect_native: bool = False

    def fingerprint(self) -> str:
        """What must match in the registry for this service to need no update."""
        fields: dict[str, object] = {
            "name": self.name, "address": self.address, "port": self.port, "tags": list(self.tags),
            "meta": dict(self.meta), "checks": sorted(check.id for check in self.checks)}
        if self.proxy is not None or self.connect_native:  # a plain service's fingerprint stays as it was
            fields |= {"proxy": asdict(self.proxy) if self.proxy else None, "native": self.connect_native}
        return _digest(fields)


@dataclass(frozen=True)
class CheckStatus:
    """A check's health as last seen: :data:`PASSING`, :data:`WARNING` or :data:`CRITICAL`, and its output."""

    status: str
    output: str = ""


@dataclass(frozen=True)
class Owner:
    """Which herder registers a service: ``scope`` names its node and data dir,
    ``session`` the herder process (several may share a data dir)."""

    scope: str
    session: str


@dataclass(frozen=True)
class RegisteredService:
    """A service as a registry holds it: its fingerprint, and the session that registered it."""

    fingerprint: str
    session: str


@dataclass(frozen=True)
class RegistryView:
    """What a registry holds of one scope's services, by service ID, and the
    status of their checks, by check ID."""

    services: dict[str, RegisteredService]
    checks: dict[str, CheckStatus]


class Backend(Protocol):
    """A service registry. ``services.backend`` in the configuration names one.

    A backend is found through the ``herder.service_backends`` entry point
    group: a callable taking the configuration table of the backend
    (``[consul]`` for ``consul``, ``[plugin.NAME]`` for any other) and an
    :class:`Owner`, and returning the backend. A registry shared by several
    herders keeps their services apart: :meth:`read` answers with the
    services of the owner's scope only, each with the session that
    registered it. Every method may raise :class:`RegistryUnavailable`;
    the sync loop then retries with a growing delay.
    """

    name: str

    def read(self) -> RegistryView:
        """The services of the owner's scope and their checks as the registry has
        them: a constant number of calls, whatever their number."""

    def register(self, service: ServiceRegistration) -> None:
        """Add or replace a service and its checks; checks it had but no longer lists go.

        :raises RegistrationRejected: the registry refuses this one as invalid (the others may go on).
        :raises RegistryUnavailable: the registry cannot take it now.
        """

    def deregister(self, service_id: str) -> None:
        """Remove a service and its checks (an unknown ID is not an error)."""

    def update_ttl(self, check_id: str, status: CheckStatus) -> None:
        """Report the result of a check herder runs itself (a script check)."""

    def close(self) -> None:
        """Stop any work of the backend's own (the checks an embedded registry runs)."""


class RegistryUnavailable(Exception):
    """The registry cannot be reached, or answered with a server error: try again later."""


class RegistrationRejected(Exception):
    """The registry refused one registration as invalid (Consul's 400): it is refused again whenever it
    is tried, and says nothing of the registry nor of the other registrations."""


def check_id(service_id: str, check: object) -> str:
    """A check's ID: a stable hash of its service and every field of ``check``
    (a dataclass), so that an edited check gets a new ID and replaces the old one."""
    return f"_herder-check-{_digest({'service': service_id, 'check': asdict(check)})[:40]}"  # type: ignore[call-overload]


def _digest(value: object) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
