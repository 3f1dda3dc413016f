"""Service registries: the embedded one, Consul, or a third one from a plugin.

``services.backend`` in the configuration names a backend; backends are found
through the ``herder.service_backends`` entry point group (herder's own two
included), so a third registry is a distribution of its own.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from herder.errors import ConfigError
from herder.services.model import (
    CRITICAL,
    PASSING,
    SCRIPT_TTL_GRACE,
    SERVICE_PREFIX,
    WARNING,
    Backend,
    CheckRegistration,
    CheckStatus,
    ExposedPath,
    Owner,
    ProxyRegistration,
    RegisteredService,
    RegistrationRejected,
    RegistryUnavailable,
    RegistryView,
    ServiceRegistration,
    UpstreamRegistration,
    check_id,
)
from herder.services.sync import ServiceSync

ENTRY_POINT_GROUP = "herder.service_backends"

__all__ = [
    "CRITICAL", "ENTRY_POINT_GROUP", "PASSING", "SCRIPT_TTL_GRACE", "SERVICE_PREFIX", "WARNING",
    "Backend", "CheckRegistration", "CheckStatus", "ExposedPath", "Owner", "ProxyRegistration", "RegisteredService",
    "RegistrationRejected", "RegistryUnavailable", "RegistryView", "ServiceRegistration", "ServiceSync",
    "UpstreamRegistration",
    "check_backend", "check_id", "open_backend",
]


def _entry_point(name: str) -> EntryPoint:
    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    if name not in found:
        raise ConfigError(f"services.backend: no service registry {name!r} is installed "
                          f"(installed: {', '.join(sorted(found)) or 'none'})")
    return found[name]


def check_backend(name: str) -> None:
    """:class:`ConfigError` unless a backend ``name`` is installed."""
    _entry_point(name)


def open_backend(name: str, config: dict[str, Any], owner: Owner) -> Backend:
    """The backend ``name``, made from its configuration table, for the herder ``owner`` names."""
    ep = _entry_point(name)
    try:
        factory = ep.load()
    except Exception as exc:  # a broken third-party backend is named, not raised as is
        raise ConfigError(f"services.backend: registry {name!r} ({ep.value}) cannot be loaded: {exc}") from None
    backend: Backend = factory(config, owner)
    return backend
