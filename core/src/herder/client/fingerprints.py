"""The drivers' fingerprints, refreshed periodically (hookspec: at start and every 30 s).

A daemon that goes away or comes back is noticed within one interval, and
placement uses what the latest fingerprint says.
"""

from __future__ import annotations

import logging
import threading

from herder.background import Background
from herder.objects import Fingerprint
from herder.plugins.hooks import Hooks

log = logging.getLogger(__name__)

FINGERPRINT_INTERVAL = 30.0


class Fingerprints:
    """The latest fingerprint of every driver; :meth:`start` refreshes them in the background."""

    def __init__(self, hooks: Hooks, interval: float = FINGERPRINT_INTERVAL) -> None:
        self.hooks = hooks
        self.interval = interval
        self._latest: dict[str, Fingerprint] = {}
        self._lock = threading.Lock()
        self._background = Background("fingerprints", self._refresh_all, first=interval)

    def get(self, driver: str) -> Fingerprint:
        """The driver's latest fingerprint, taken now if there is none yet."""
        with self._lock:
            found = self._latest.get(driver)
        return found if found is not None else self.refresh(driver)

    def latest(self) -> dict[str, Fingerprint]:
        """The fingerprints taken so far, by driver, none taken now."""
        with self._lock:
            return dict(self._latest)

    def refresh(self, driver: str) -> Fingerprint:
        """Fingerprint ``driver`` now (a raising fingerprint is an unhealthy one)."""
        fingerprint = self.hooks.fingerprint(driver)
        with self._lock:
            before = self._latest.get(driver)
            self._latest[driver] = fingerprint
        if before is not None and (before.detected, before.healthy) != (fingerprint.detected, fingerprint.healthy):
            state = "healthy" if fingerprint.healthy else "unhealthy"
            log.warning("driver %s is now %s: %s", driver, state, fingerprint.description)
        return fingerprint

    def start(self) -> None:
        """Refresh every driver every ``interval`` seconds until :meth:`stop`."""
        self._background.start()

    def stop(self) -> None:
        # Not waiting: a driver's fingerprint may hang (a daemon that does not answer).
        self._background.stop(join=False)

    def _refresh_all(self) -> float:
        for driver in self.hooks.drivers:
            if self._background.stopped.is_set():
                break
            self.refresh(driver)
        return self.interval
