"""The sync loop: the registry made to hold exactly what live tasks want.

Tasks never talk to the registry. They change the *desired* set (a
service per task and port, keyed by owner), and one loop reconciles: it reads
what the registry holds of herder's services (a constant number of calls),
registers what is missing or changed, and deregisters every herder service
no live task wants, which also removes what a herder that died left behind.
While the registry cannot be reached the loop retries with a delay doubling
up to 30 s; nobody waits for it, so a registry that is down never delays a
task.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from herder.background import Background
from herder.services.model import (
    Backend,
    CheckStatus,
    RegistrationRejected,
    RegistryUnavailable,
    RegistryView,
    ServiceRegistration,
)

log = logging.getLogger(__name__)

MIN_BACKOFF = 1.0
MAX_BACKOFF = 30.0
POLL = 1.0
"""How often check statuses are read while any service has checks."""
ANTI_ENTROPY = 30.0
"""How often the registry is compared with the desired set when nothing changes."""

ViewListener = Callable[[RegistryView], None]


class ServiceSync:
    """Keeps ``backend`` in line with the services of live tasks.

    ``on_view`` sees the registry's view after every successful sync: what
    check statuses are shown and acted on from. ``removable`` says whether a
    service no task wants, registered by the given session, may be removed:
    a service of another herder that is still running on the same data dir
    is not this one's to remove.
    """

    def __init__(self, backend: Backend, on_view: ViewListener | None = None, *,
                 removable: Callable[[str], bool] = lambda session: True,
                 min_backoff: float = MIN_BACKOFF, max_backoff: float = MAX_BACKOFF) -> None:
        self.backend = backend
        self._on_view = on_view or (lambda view: None)
        self._removable = removable
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._desired: dict[str, dict[str, ServiceRegistration]] = {}
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every change of the desired set
        self._synced = 0      # the generation the registry last matched
        self._synced_cond = threading.Condition(self._lock)
        self._failing = False
        self._rejected: dict[str, str] = {}
        """The fingerprint of each service the registry refused, as last said in the log."""
        self._backoff = min_backoff
        self._background = Background("service-sync", self._step)

    # -- the desired set -----------------------------------------------------

    def set(self, owner: str, services: Iterable[ServiceRegistration]) -> None:
        """Make ``services`` the ones ``owner`` (a task or a group of an allocation) wants."""
        wanted = {service.id: service for service in services}
        with self._lock:
            if not wanted and owner not in self._desired:
                # Nothing wanted, before or now (every task without services starts so):
                # no change, so no pass of the sync loop for it.
                return
            self._desired[owner] = wanted
            self._generation += 1
        self._changed()

    def remove(self, owner: str) -> None:
        """``owner`` wants no service any more."""
        with self._lock:
            if self._desired.pop(owner, None) is None:
                return
            self._generation += 1
        self._changed()

    def _changed(self) -> None:
        """Have the loop match the desired set soon; while the registry is unreachable, changes
        wait for its next try (with their backoff), rather than each bringing one."""
        if not self._failing:
            self._background.wake()

    def desired(self) -> dict[str, ServiceRegistration]:
        with self._lock:
            return {sid: service for services in self._desired.values() for sid, service in services.items()}

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the registry to match the desired set as it is
        now; False at once while the registry is unreachable."""
        deadline = time.monotonic() + timeout
        with self._synced_cond:
            target = self._generation
            if not self._background.running:
                return False
            while self._synced < target:
                left = deadline - time.monotonic()
                if self._failing or left <= 0:
                    return False
                self._background.wake()
                self._synced_cond.wait(left)
        return True

    def report(self, check_id: str, status: CheckStatus) -> None:
        """Report the result of a check herder runs itself; lost while the registry is down
        (the next result, within the check's TTL, makes up for it)."""
        try:
            self.backend.update_ttl(check_id, status)
        except RegistryUnavailable as exc:
            log.debug("check %s: result not reported: %s", check_id, exc)

    # -- the loop --------------------------------------------------------------

    def start(self) -> None:
        self._background.start()

    def close(self) -> None:
        """Stop the loop after one last reconciliation, so that a herder leaving
        leaves the registry as its tasks are: the services of tasks still
        running stay, the others go."""
        running = self._background.running
        self._background.stop()
        if running and not self._failing:
            try:
                self.sync_once()
            except RegistryUnavailable as exc:
                log.warning("service registry unreachable at exit: %s", exc)

    def sync_once(self) -> RegistryView:
        """One reconciliation: read, register what is missing or changed, deregister
        what nobody wants. Raises :class:`RegistryUnavailable`."""
        with self._lock:
            generation = self._generation
        desired = self.desired()
        view = self.backend.read()
        for service_id, service in desired.items():
            registered = view.services.get(service_id)
            if registered is None or registered.fingerprint != service.fingerprint():
                self._register(service)
        for service_id in self._rejected.keys() - desired.keys():
            del self._rejected[service_id]
        for service_id in view.services.keys() - desired.keys():
            if self._removable(view.services[service_id].session):
                self.backend.deregister(service_id)
        with self._synced_cond:
            self._synced = max(self._synced, generation)
            self._failing = False
            self._synced_cond.notify_all()
        return view

    def _register(self, service: ServiceRegistration) -> None:
        """Register ``service``; one the registry refuses (a job's, whatever its text) is left out, said
        once in the log, and tried again next round: it holds up neither the other services nor a flush."""
        try:
            self.backend.register(service)
        except RegistrationRejected as exc:
            fingerprint = service.fingerprint()
            if self._rejected.get(service.id) != fingerprint:
                # Both carry job text: quoted, a line break of it starts no line of the log.
                log.warning("service %r is not registered: %r", service.id, str(exc))
                self._rejected[service.id] = fingerprint
        else:
            self._rejected.pop(service.id, None)

    def _step(self) -> float:
        """One round of the loop; the seconds until the next (a change brings it sooner)."""
        try:
            view = self.sync_once()
        except RegistryUnavailable as exc:
            if not self._failing:
                log.warning("service registry unreachable, retrying for as long as it takes: %s", exc)
            with self._synced_cond:
                self._failing = True
                self._synced_cond.notify_all()
            # Changes wait too: they are in the desired set for the next round.
            backoff, self._backoff = self._backoff, min(self._backoff * 2, self._max_backoff)
            return backoff
        except Exception:  # a bug must not end the loop: the next round tries again
            log.exception("service sync failed")
            view = None
        self._backoff = self._min_backoff
        if view is not None:
            self._on_view(view)
        any_checks = any(service.checks for service in self.desired().values())
        return POLL if any_checks else ANTI_ENTROPY
