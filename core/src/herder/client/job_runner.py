"""Running a whole job in the foreground: what ``herder run`` does."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.node import Node, host_attributes
from herder.client.ports import PortAllocator
from herder.config import Config
from herder.errors import PlacementError
from herder.model import Job
from herder.plugins.hooks import Hooks


class JobRunner:
    """Places every allocation of a job, runs them in parallel, and stops them on request."""

    def __init__(self, job: Job, hooks: Hooks, config: Config, on_event: Callable[[EventRecord], None]) -> None:
        self.job = job
        self.hooks = hooks
        self.config = config
        self.on_event = on_event
        self.allocs: list[AllocRunner] = []
        self._stop_requested = threading.Event()
        self._lock = threading.Lock()
        self.ports = PortAllocator(config.ports.min, config.ports.max, config.ports.reserved,
                                   host_ip=config.ports.host_ip)

    def node(self) -> Node:
        """Fingerprint the drivers the job uses; a driver that is not healthy fails placement."""
        attributes = host_attributes()
        for driver in sorted({t.driver for g in self.job.groups for t in g.tasks}):
            fingerprint = self.hooks.fingerprint(driver)
            if not (fingerprint.detected and fingerprint.healthy):
                raise PlacementError(f"driver {driver} is not available: {fingerprint.description}")
            attributes.update(fingerprint.attributes)
        return Node(name=self.config.node_name, datacenter=self.config.datacenter, attributes=attributes)

    def place(self) -> None:
        """Create every allocation; on a placement error nothing is left allocated."""
        node = self.node()
        try:
            for group in self.job.groups:
                for index in range(group.count):
                    alloc = AllocRunner(alloc_id=str(uuid.uuid4()), index=index, job=self.job, group=group,
                                        hooks=self.hooks, data_dir=self.config.data_dir, ports=self.ports,
                                        node=node, on_event=self.on_event)
                    with self._lock:
                        self.allocs.append(alloc)
        except PlacementError:
            for alloc in self.allocs:
                alloc.discard()
            raise

    def run(self) -> str:
        """Run every allocation to the end; returns "complete", "failed" or "stopped"."""
        threads = [threading.Thread(target=a.run, name=f"alloc-{a.alloc.name}", daemon=True) for a in self.allocs]
        if self._stop_requested.is_set():  # asked to stop while placing: nothing runs
            self.stop()
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
        if any(a.failed for a in self.allocs):
            return "failed"
        return "stopped" if self._stop_requested.is_set() else "complete"

    def stop(self) -> None:
        """Stop every task gracefully; safe to call from a signal handler's thread."""
        self._stop_requested.set()
        with self._lock:
            allocs = list(self.allocs)
        for alloc in allocs:
            alloc.stop()

    def summary(self, status: str) -> dict[str, Any]:
        """The ``--json`` summary of SPEC §9."""
        return {"status": status, "allocs": {
            a.alloc.id: {"name": a.alloc.name, "tasks": {
                t.name: {"state": t.status.state, "failed": t.status.failed, "restarts": t.status.restarts,
                         "exit_code": t.status.exit_code} for t in a.tasks}}
            for a in self.allocs}}
