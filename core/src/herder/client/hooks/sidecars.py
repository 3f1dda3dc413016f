"""The registrations of Connect sidecar proxies, beside the group services they front.

As Nomad's ``connectSidecarRegistration`` (``command/agent/consul/connect.go``):
the sidecar of a service registered as ``ID`` is the ``connect-proxy`` service
``ID-sidecar-proxy`` named ``NAME-sidecar-proxy``, with the parent's ID and
the port it listens on inside the allocation's namespace as its
destination, the upstreams, and a TCP check on its public listener.

The public listener is advertised at the allocation's address on its bridge
and the proxy's port (the same number inside and on the host): Consul's
built-in proxy binds the address it is registered with, which must be one of
the namespace's own, and every other namespace and the host reach it there.
Envoy is told to bind every address (``bind_address``) as Nomad tells it.
"""

from __future__ import annotations

from herder.context import AllocatedPort
from herder.errors import HerderError
from herder.model import Check, ConnectProxy, Service
from herder.objects import AllocNetwork
from herder.services import (
    CheckRegistration,
    ExposedPath,
    ProxyRegistration,
    ServiceRegistration,
    UpstreamRegistration,
    check_id,
)

SIDECAR_SUFFIX = "-sidecar-proxy"
LISTENING_CHECK = Check(type="tcp", name="Connect Sidecar Listening", interval=10.0, timeout=2.0)


def sidecar_registration(service: Service, parent: ServiceRegistration, ports: list[AllocatedPort],
                         network: AllocNetwork | None) -> ServiceRegistration | None:
    """The registration of ``service``'s sidecar (``parent`` is the service's own), or None
    when it has none. :raises HerderError: a port it names is not allocated."""
    connect = service.connect
    if connect is None or connect.sidecar is None:
        return None
    sidecar = connect.sidecar
    listener = _port(sidecar.port, ports)
    address = network.ip if network is not None and network.ip else listener.host_ip
    proxy = sidecar.proxy
    local_port = local_service_port(service, proxy, ports)
    registration_id = parent.id + SIDECAR_SUFFIX
    checks: tuple[CheckRegistration, ...] = ()
    if not sidecar.disable_default_tcp_check:
        host = f"[{address}]" if ":" in address else address
        checks = (CheckRegistration(id=check_id(registration_id, LISTENING_CHECK), name=LISTENING_CHECK.name,
                                    kind="tcp", interval=LISTENING_CHECK.interval, timeout=LISTENING_CHECK.timeout,
                                    target=f"{host}:{listener.value}"),)
    config: dict[str, object] = {"bind_address": "0.0.0.0", **proxy.config, "bind_port": listener.value}
    return ServiceRegistration(
        id=registration_id, name=service.name + SIDECAR_SUFFIX, address=address, port=listener.value,
        tags=sidecar.tags, checks=checks,
        proxy=ProxyRegistration(
            destination_name=service.name, destination_id=parent.id,
            local_service_address=proxy.local_service_address, local_service_port=local_port,
            upstreams=tuple(UpstreamRegistration(up.destination_name, up.local_bind_port, up.local_bind_address,
                                                 up.datacenter) for up in proxy.upstreams),
            expose=tuple(ExposedPath(path.path, path.protocol, path.local_path_port or local_port,
                                     _port(path.listener_port, ports).value) for path in proxy.expose),
            config=config,
        ),
    )


def local_service_port(service: Service, proxy: ConnectProxy, ports: list[AllocatedPort]) -> int:
    """Where the proxied service listens inside the namespace: the proxy's ``local_service_port``,
    else the service's port: a number as it is, a label's ``to`` (or, without one, the same port
    as on the host)."""
    if proxy.local_service_port:
        return proxy.local_service_port
    if service.port.isdigit():
        return int(service.port)
    if not service.port:
        raise HerderError("a Connect service needs a port, or its proxy a local_service_port")
    port = _port(service.port, ports)
    return port.to or port.value


def _port(label: str, ports: list[AllocatedPort]) -> AllocatedPort:
    for port in ports:
        if port.label == label:
            return port
    raise HerderError(f"port {label!r} is not allocated to the group")
