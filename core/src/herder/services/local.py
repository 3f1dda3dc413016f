"""The embedded registry: services kept in this process, checks run by herder.

The default backend: no daemon to install. It answers like an agent would
(the sync loop drives it the same way as Consul) and runs http and tcp checks
itself; a script check's TTL expires into critical as Consul's does. grpc
checks are not run here: they are left out, with a warning in the log.

It is also herder's native service discovery (Nomad's ``provider =
"nomad"``): each change of what it holds raises its :attr:`LocalRegistry.index`,
and :meth:`LocalRegistry.records` lists every service with the indexes of
its registration, as Nomad's ``/v1/services`` and templates' ``nomadService``
read them.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from herder.services.model import (
    CRITICAL,
    CheckRegistration,
    CheckStatus,
    Owner,
    RegisteredService,
    RegistryView,
    ServiceRegistration,
)
from herder.services.probes import Prober, Scheduler

log = logging.getLogger(__name__)

UNSUPPORTED = frozenset({"grpc"})


@dataclass
class _CheckState:
    check: CheckRegistration
    service_id: str
    status: CheckStatus
    expires: float | None = None  # TTL checks: when no report has come in time


@dataclass(frozen=True)
class Record:
    """A service held, and the registry's index when it was first registered and last changed."""

    service: ServiceRegistration
    create_index: int
    modify_index: int


class LocalRegistry:
    """An in-process registry. Thread-safe."""

    name = "local"

    def __init__(self, config: dict[str, Any] | None = None, owner: Owner | None = None) -> None:
        # In-process: every service here is this herder's own.
        self._session = owner.session if owner else ""
        self._services: dict[str, ServiceRegistration] = {}
        self._checks: dict[str, _CheckState] = {}
        self._indexes: dict[str, tuple[int, int]] = {}  # service ID -> (create, modify)
        self._index = 1
        self._lock = threading.Lock()
        self._prober = Prober()
        self._scheduler = Scheduler(self._run_check, name="local-checks")

    def read(self) -> RegistryView:
        now = time.monotonic()
        with self._lock:
            services = {sid: RegisteredService(service.fingerprint(), self._session)
                        for sid, service in self._services.items()}
            checks = {cid: self._expire(state, now) for cid, state in self._checks.items()}
        return RegistryView(services=services, checks=checks)

    def instances(self) -> list[tuple[ServiceRegistration, list[CheckStatus]]]:
        """Every service held, with the status of each of its checks (for templates)."""
        now = time.monotonic()
        with self._lock:
            return [(service, [self._expire(self._checks[c.id], now) for c in service.checks if c.id in self._checks])
                    for service in self._services.values()]

    @property
    def index(self) -> int:
        """Raised by every change of the services held (not of their checks' status)."""
        with self._lock:
            return self._index

    def records(self) -> list[Record]:
        """Every service held, by ID."""
        with self._lock:
            return [Record(service, *self._indexes[sid]) for sid, service in sorted(self._services.items())]

    def register(self, service: ServiceRegistration) -> None:
        checks = tuple(check for check in service.checks if check.kind not in UNSUPPORTED)
        for check in service.checks:
            if check.kind in UNSUPPORTED:
                log.warning("service %s: the local registry does not run %s checks; check %r is left out",
                            service.name, check.kind, check.name)
        with self._lock:
            old = self._services.get(service.id)
            self._services[service.id] = service
            if old != service:
                self._index += 1
                self._indexes[service.id] = (self._indexes.get(service.id, (self._index, 0))[0], self._index)
            kept = {check.id for check in checks}
            for check_id in [c.id for c in old.checks] if old else []:
                if check_id not in kept:
                    self._drop_check(check_id)
            for check in checks:
                if check.id in self._checks:
                    continue  # an unchanged check keeps its status, as in Consul
                self._checks[check.id] = _CheckState(
                    check, service.id, CheckStatus(check.initial_status or CRITICAL),
                    expires=time.monotonic() + check.ttl if check.kind == "ttl" else None)
                if check.kind != "ttl":
                    self._scheduler.add(check.id, check.interval)

    def deregister(self, service_id: str) -> None:
        with self._lock:
            service = self._services.pop(service_id, None)
            if service is not None:
                self._index += 1
                del self._indexes[service_id]
            for check in service.checks if service else ():
                self._drop_check(check.id)

    def update_ttl(self, check_id: str, status: CheckStatus) -> None:
        with self._lock:
            state = self._checks.get(check_id)
            if state is None or state.check.kind != "ttl":
                return  # the service went away while its check ran
            state.status = status
            state.expires = time.monotonic() + state.check.ttl

    def close(self) -> None:
        self._scheduler.close()
        self._prober.close()

    def _drop_check(self, check_id: str) -> None:
        self._checks.pop(check_id, None)
        self._scheduler.remove(check_id)

    @staticmethod
    def _expire(state: _CheckState, now: float) -> CheckStatus:
        if state.expires is not None and now > state.expires and state.status.status != CRITICAL:
            state.status = CheckStatus(CRITICAL, f"TTL expired (last output before timeout follows): "
                                                 f"{state.status.output}")
        return state.status

    def _run_check(self, check_id: str) -> None:
        with self._lock:
            state = self._checks.get(check_id)
        if state is None:
            return
        result = self._prober.probe(state.check)
        with self._lock:
            if self._checks.get(check_id) is state:
                state.status = result
