"""Deployments: the health of a job version's new allocations, followed as its update strategy says.

A deployment follows each of its allocations until it is healthy (every main
task and sidecar ran ``min_healthy_time``, and with ``health_check =
"checks"`` every service check passes) or unhealthy (a task failed, or the
``healthy_deadline`` passed first); it is successful once all are healthy,
failed once one is not or the ``progress_deadline`` passed, cancelled once an
allocation of it is stopped. An allocation's health, once known, stays.

Kept in memory: an agent started again knows the allocations (they are in its
state) but not the deployments of before.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from herder.client.alloc_runner import AllocRunner

DeploymentStatus = Literal["running", "successful", "failed", "cancelled"]

Checks = Callable[[str], dict[str, list[dict[str, str]]]]
"""The service checks of an allocation, by task, each with its ``status``."""


@dataclass(frozen=True)
class Update:
    """A group's update strategy, as a deployment follows it (seconds)."""

    health_check: str
    """``checks``: the tasks run and their service checks pass; ``task_states``: the tasks run."""
    min_healthy_time: float
    healthy_deadline: float
    progress_deadline: float
    auto_revert: bool


@dataclass
class Deployment:
    """The deployment of version ``version`` of job ``job``: its allocations, each group's
    strategy and how many allocations each group wants. ``revision`` counts its changes."""

    id: str
    job: str
    version: int
    allocs: list[str]
    groups: dict[str, Update]
    desired: dict[str, int]
    started: float = field(default_factory=time.time)
    status: DeploymentStatus = "running"
    description: str = "Deployment is running"
    healthy: dict[str, bool | None] = field(default_factory=dict)
    """Each allocation's health, None while it is not known yet."""
    revision: int = 0


class Deployments:
    """Every deployment this client made, and the one of each allocation. Thread-safe.

    ``alloc`` finds an allocation by ID, ``checks`` its service checks.
    """

    def __init__(self, alloc: Callable[[str], AllocRunner | None], checks: Checks) -> None:
        self._alloc = alloc
        self._checks = checks
        self._lock = threading.Lock()
        self._deployments: dict[str, Deployment] = {}
        self._of_alloc: dict[str, str] = {}

    def start(self, job: str, version: int, allocs: Iterable[AllocRunner],
              groups: Mapping[str, Update]) -> Deployment | None:
        """Deploy version ``version`` of ``job``: follow ``allocs`` of the groups that have a
        strategy in ``groups``; None when none of them has one (nothing is deployed)."""
        deployed = [a for a in allocs if a.group.name in groups]
        if not deployed:
            return None
        deployment = Deployment(
            id=str(uuid.uuid4()), job=job, version=version, allocs=[a.alloc.id for a in deployed],
            groups=dict(groups), desired={name: sum(a.group.name == name for a in deployed) for name in groups})
        with self._lock:
            self._deployments[deployment.id] = deployment
            for alloc in deployed:
                self._of_alloc[alloc.alloc.id] = deployment.id
        return deployment

    def get(self, deployment_id: str) -> Deployment | None:
        """The deployment, its health brought up to date."""
        with self._lock:
            found = self._deployments.get(deployment_id)
            if found is not None:
                self._follow(found)
            return found

    def of(self, alloc_id: str) -> Deployment | None:
        """The deployment that follows the allocation, if one does."""
        with self._lock:
            found = self._of_alloc.get(alloc_id)
        return self.get(found) if found else None

    def of_job(self, job: str | None = None) -> list[Deployment]:
        """The deployments of ``job`` (of every job: None), newest first."""
        with self._lock:
            found = [d for d in self._deployments.values() if job is None or d.job == job]
            for deployment in found:
                self._follow(deployment)
        return found[::-1]  # made in order

    def _follow(self, deployment: Deployment) -> None:
        """Bring the deployment's health up to date (the lock held)."""
        if deployment.status != "running":
            return
        now = time.time()
        healthy = {alloc_id: self._health(alloc_id, deployment, now) for alloc_id in deployment.allocs}
        status: DeploymentStatus = "running"
        description = deployment.description
        stopped = [alloc_id for alloc_id in deployment.allocs
                   if (alloc := self._alloc(alloc_id)) is None or alloc.stopping]
        if any(h is False for h in healthy.values()):
            status, description = "failed", "Failed due to unhealthy allocations"
        elif all(healthy.values()):
            status, description = "successful", "Deployment completed successfully"
        elif stopped:
            status, description = "cancelled", "Cancelled because job is stopped"
        elif any(now - deployment.started > update.progress_deadline for update in deployment.groups.values()):
            status, description = "failed", "Failed due to progress deadline"
        if healthy != deployment.healthy or status != deployment.status:
            deployment.healthy, deployment.status, deployment.description = healthy, status, description
            deployment.revision += 1

    def _health(self, alloc_id: str, deployment: Deployment, now: float) -> bool | None:
        """An allocation's health as its group's update strategy judges it: False once a task failed
        or it outlived the healthy deadline unhealthy, True once every task ran ``min_healthy_time``
        (and, with ``health_check = "checks"``, every check passes)."""
        known = deployment.healthy.get(alloc_id)
        if known is not None:
            return known  # an allocation's health is set once, as Nomad's
        alloc = self._alloc(alloc_id)
        if alloc is None:
            return None
        update = deployment.groups[alloc.group.name]
        if alloc.failed or alloc.status == "failed":
            return False
        main = [t for t in alloc.tasks if t.task.is_main or t.task.is_sidecar]
        started = [t.status.started_at for t in main if t.status.state == "running" and not t.done]
        if len(started) == len(main) and all(s is not None and now - s >= update.min_healthy_time
                                             for s in started):
            checks = self._checks(alloc_id) if update.health_check == "checks" else {}
            if all(c["status"] == "passing" for task in checks.values() for c in task):
                return True
        if now - deployment.started > update.healthy_deadline:
            return False
        return None
