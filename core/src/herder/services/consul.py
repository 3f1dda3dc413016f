"""The Consul backend: a Consul agent's local services, through py-consul.

What this backend relies on in Consul 1.10 (see the recorded answers in
the test fixtures): the decoder is case-insensitive, so py-consul's
lowercase keys are fine; re-registering a service keeps the status of its
unchanged checks, and with ``replace-existing-checks`` drops the ones no
longer listed; deregistering an unknown ID answers 200; a TTL check's
pass/warn/fail note becomes its output, and an unknown check answers 500.
An idle sync is two reads, ``/v1/agent/services`` and ``/v1/agent/checks``,
filtered to herder's own IDs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit

import consul  # type: ignore[import-untyped]  # py-consul ships no type information
import requests

from herder.services.model import (
    CRITICAL,
    PASSING,
    SERVICE_PREFIX,
    WARNING,
    CheckRegistration,
    CheckStatus,
    Owner,
    ProxyRegistration,
    RegisteredService,
    RegistrationRejected,
    RegistryUnavailable,
    RegistryView,
    ServiceRegistration,
)

DEFAULT_ADDRESS = "127.0.0.1:8500"
TIMEOUT = 5.0
META_FINGERPRINT = "herder_fingerprint"
"""A service's fingerprint, kept in its meta: what the sync compares, so that a
changed service is updated without reading each one back field by field."""
META_SCOPE, META_SESSION = "herder_scope", "herder_session"
"""Which herder registered a service (:class:`herder.services.Owner`)."""

_T = TypeVar("_T")


class ConsulBackend:
    """A Consul agent at ``address`` (``host:port`` or a URL), with an optional ACL token."""

    name = "consul"

    def __init__(self, config: dict[str, Any], owner: Owner) -> None:
        self.owner = owner
        address = str(config.get("address") or DEFAULT_ADDRESS)
        url = urlsplit(address if "://" in address else f"http://{address}")
        self.address = f"{url.scheme}://{url.hostname}:{url.port or 8500}"
        self._client = consul.Consul(host=url.hostname or "127.0.0.1", port=url.port or 8500,
                                     scheme=url.scheme, token=config.get("token") or None)
        self._client.http.connections_timeout = TIMEOUT

    def _call(self, request: Callable[[], _T]) -> _T:
        try:
            return request()
        except (requests.RequestException, consul.ConsulException) as exc:
            raise RegistryUnavailable(f"consul at {self.address}: {exc}") from exc

    def read(self) -> RegistryView:
        where = f'ID matches "^{SERVICE_PREFIX}" and Meta.{META_SCOPE} == "{self.owner.scope}"'
        services = self._call(lambda: self._client.agent.services(filter_expr=where))
        checks = self._call(lambda: self._client.agent.checks(
            filter_expr=f'ServiceID matches "^{SERVICE_PREFIX}"'))
        return RegistryView(
            services={sid: RegisteredService((s.get("Meta") or {}).get(META_FINGERPRINT, ""),
                                             (s.get("Meta") or {}).get(META_SESSION, ""))
                      for sid, s in services.items()},
            checks={cid: CheckStatus(c.get("Status", ""), c.get("Output", "")) for cid, c in checks.items()},
        )

    def register(self, service: ServiceRegistration) -> None:
        checks = [_check(check) for check in service.checks]
        meta = {**service.meta, META_FINGERPRINT: service.fingerprint(), META_SCOPE: self.owner.scope,
                META_SESSION: self.owner.session}
        connect = {"Native": True} if service.connect_native else None
        try:
            self._call(lambda: self._client.agent.service.register(
                service.name, service_id=service.id, address=service.address, port=service.port,
                tags=list(service.tags), meta=meta, check=checks[0] if checks else None, extra_checks=checks[1:],
                replace_existing_checks=True, connect=connect, kind="connect-proxy" if service.proxy else None,
                proxy=_proxy(service.proxy) if service.proxy else None))
        except RegistryUnavailable as exc:
            if isinstance(exc.__cause__, consul.exceptions.BadRequest):
                raise RegistrationRejected(f"consul at {self.address} refuses service {service.id}: "
                                           f"{exc.__cause__}") from exc.__cause__
            raise

    def deregister(self, service_id: str) -> None:
        self._call(lambda: self._client.agent.service.deregister(service_id))

    def update_ttl(self, check_id: str, status: CheckStatus) -> None:
        check = self._client.agent.check
        report = {PASSING: check.ttl_pass, WARNING: check.ttl_warn, CRITICAL: check.ttl_fail}[status.status]
        self._call(lambda: report(check_id, notes=status.output or None))

    def close(self) -> None:
        self._client.http.session.close()


def _proxy(proxy: ProxyRegistration) -> dict[str, Any]:
    """A sidecar's ``Proxy`` as the agent's register endpoint takes it."""
    fields: dict[str, Any] = {
        "DestinationServiceName": proxy.destination_name, "DestinationServiceID": proxy.destination_id,
        "LocalServiceAddress": proxy.local_service_address, "LocalServicePort": proxy.local_service_port,
        "Config": dict(proxy.config),
        "Upstreams": [{"DestinationName": up.destination_name, "LocalBindPort": up.local_bind_port,
                       "LocalBindAddress": up.local_bind_address, "Datacenter": up.datacenter}
                      for up in proxy.upstreams],
    }
    if proxy.expose:
        fields["Expose"] = {"Paths": [{"Path": path.path, "Protocol": path.protocol,
                                       "LocalPathPort": path.local_path_port, "ListenerPort": path.listener_port}
                                      for path in proxy.expose]}
    return fields


def _check(check: CheckRegistration) -> dict[str, Any]:
    """A check definition as the agent's register endpoint takes it."""
    fields: dict[str, Any] = {"CheckID": check.id, "Name": check.name}
    if check.kind == "ttl":
        fields["TTL"] = _go_duration(check.ttl)
    else:
        fields |= {"Interval": _go_duration(check.interval), "Timeout": _go_duration(check.timeout)}
    if check.kind == "http":
        fields |= {"HTTP": check.target, "Method": check.method, "TLSSkipVerify": check.tls_skip_verify,
                   "Header": {name: list(values) for name, values in check.header.items()}}
    elif check.kind == "tcp":
        fields["TCP"] = check.target
    elif check.kind == "grpc":
        fields |= {"GRPC": check.target, "GRPCUseTLS": check.grpc_use_tls}
    if check.initial_status:
        fields["Status"] = check.initial_status
    return fields


def _go_duration(seconds: float) -> str:
    return f"{int(seconds * 1000)}ms"
