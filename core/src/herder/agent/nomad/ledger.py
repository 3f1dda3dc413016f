"""What Nomad's servers keep and herder has no need of: evaluations, deployments, raft indexes.

herder places a job the moment it is submitted, so every evaluation here is
complete when it is made; it only tells the command line's monitor which
allocations the submission made, and which deployment follows them. A
deployment follows the health of its allocations as the job's ``update`` block
says (``min_healthy_time``, ``healthy_deadline``, ``health_check``), as Nomad's
deployment watcher does. The index every answer carries (``X-Nomad-Index``)
is the agent's event count plus the changes made here, so it grows whenever
anything a watcher reads may have changed.

Kept in memory: an agent started again knows the allocations (they are in its
state) but not the evaluations and deployments of before.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal

from herder.agent.events import EventLog
from herder.app import Agent, NotFound
from herder.client.alloc_runner import AllocRunner

SECOND = 1_000_000_000
"""Nanoseconds, Nomad's unit of duration."""

# Nomad's DefaultUpdateStrategy (api/jobs.go), the update block of a service job that has none.
DEFAULT_UPDATE: dict[str, Any] = {
    "MaxParallel": 1, "HealthCheck": "checks", "MinHealthyTime": 10 * SECOND,
    "HealthyDeadline": 300 * SECOND, "ProgressDeadline": 600 * SECOND, "AutoRevert": False, "Canary": 0,
}

DeploymentStatus = Literal["running", "successful", "failed", "cancelled"]


@dataclass(frozen=True)
class Update:
    """A group's update strategy, as a deployment follows it (seconds)."""

    health_check: str
    min_healthy_time: float
    healthy_deadline: float
    progress_deadline: float
    auto_revert: bool

    @classmethod
    def of(cls, job: dict[str, Any], group: dict[str, Any]) -> Update | None:
        """The strategy of ``group`` of Nomad job ``job`` (its own over the job's over Nomad's
        defaults); None when the group is not deployed (``max_parallel = 0``)."""
        merged = DEFAULT_UPDATE | _set(job.get("Update")) | _set(group.get("Update"))
        if not merged["MaxParallel"]:
            return None
        return cls(health_check=str(merged["HealthCheck"]), min_healthy_time=merged["MinHealthyTime"] / SECOND,
                   healthy_deadline=merged["HealthyDeadline"] / SECOND,
                   progress_deadline=merged["ProgressDeadline"] / SECOND, auto_revert=bool(merged["AutoRevert"]))


def _set(update: Any) -> dict[str, Any]:
    """The fields an update block sets (Nomad JSON has null for "the default")."""
    return {k: v for k, v in update.items() if v is not None} if isinstance(update, dict) else {}


@dataclass
class Evaluation:
    id: str
    job: str
    job_type: str
    triggered_by: str
    allocs: list[str]
    create_index: int
    created: int
    """Unix nanoseconds."""
    deployment: str = ""


@dataclass
class Deployment:
    id: str
    job: str
    version: int
    allocs: list[str]
    groups: dict[str, Update]
    desired: dict[str, int]
    create_index: int
    started: float = field(default_factory=time.time)
    status: DeploymentStatus = "running"
    description: str = "Deployment is running"
    modify_index: int = 0
    healthy: dict[str, bool | None] = field(default_factory=dict)
    """Each allocation's health, None while it is not known yet."""


class Ledger:
    """The evaluations, deployments and indexes of the Nomad API, over ``agent``. Thread-safe."""

    def __init__(self, agent: Agent, events: EventLog) -> None:
        self.agent = agent
        self.events = events
        self._lock = threading.Lock()
        self._changes = 0
        self._evaluations: dict[str, Evaluation] = {}
        self._deployments: dict[str, Deployment] = {}
        self._alloc_evals: dict[str, str] = {}
        self._alloc_deployments: dict[str, str] = {}
        self._created: dict[str, int] = {}
        self._alloc_indexes: dict[str, int] = {}

    # -- indexes --------------------------------------------------------------

    def index(self) -> int:
        """The current index: it grows with every task event and every change made here (never 0)."""
        with self._lock:
            return 1 + self.events.last + self._changes

    def _bump(self) -> int:
        """Count a change (the lock held); the index it makes."""
        self._changes += 1
        return 1 + self.events.last + self._changes

    # -- evaluations ------------------------------------------------------------

    def evaluate(self, job: str, job_type: str, triggered_by: str, allocs: list[AllocRunner],
                 document: dict[str, Any] | None = None) -> Evaluation:
        """Record the (complete) evaluation of a change to ``job`` that made or stopped ``allocs``.
        A registration of a service job whose allocations are new starts a deployment of them,
        as the Nomad job ``document`` asks."""
        with self._lock:
            index = self._bump()
            evaluation = Evaluation(id=str(uuid.uuid4()), job=job, job_type=job_type, triggered_by=triggered_by,
                                    allocs=[a.alloc.id for a in allocs], create_index=index,
                                    created=time.time_ns())
            fresh = [a for a in allocs if a.alloc.id not in self._alloc_evals]
            for alloc in fresh:
                self._alloc_evals[alloc.alloc.id] = evaluation.id
                self._alloc_indexes[alloc.alloc.id] = index
            if triggered_by == "job-register" and job_type == "service" and document is not None:
                evaluation.deployment = self._deploy(job, fresh, document, index) if fresh else \
                    self._alloc_deployments.get(allocs[0].alloc.id, "") if allocs else ""
            self._evaluations[evaluation.id] = evaluation
            return evaluation

    def _deploy(self, job: str, allocs: list[AllocRunner], document: dict[str, Any], index: int) -> str:
        groups = {str(g.get("Name")): g for g in document.get("TaskGroups") or [] if isinstance(g, dict)}
        updates = {name: update for name, group in groups.items() if (update := Update.of(document, group))}
        deployed = [a for a in allocs if a.group.name in updates]
        if not deployed:
            return ""
        deployment = Deployment(
            id=str(uuid.uuid4()), job=job, version=self.version(job, deployed[0].job_id),
            allocs=[a.alloc.id for a in deployed], groups=updates,
            desired={name: sum(a.group.name == name for a in deployed) for name in updates},
            create_index=index, modify_index=index)
        self._deployments[deployment.id] = deployment
        for alloc in deployed:
            self._alloc_deployments[alloc.alloc.id] = deployment.id
        return deployment.id

    def evaluation(self, eval_id: str) -> Evaluation:
        with self._lock:
            found = self._evaluations.get(eval_id)
        if found is None:
            raise NotFound("eval not found")
        return found

    def evaluations(self, job: str | None = None) -> list[Evaluation]:
        with self._lock:
            return [e for e in self._evaluations.values() if job is None or e.job == job]

    def create_index(self, alloc_id: str) -> int:
        """The index at which the allocation was made (1 for one made before this agent, or elsewhere)."""
        with self._lock:
            return self._alloc_indexes.get(alloc_id, 1)

    def eval_of(self, alloc_id: str) -> str:
        with self._lock:
            return self._alloc_evals.get(alloc_id, "")

    # -- deployments ------------------------------------------------------------

    def deployment_of(self, alloc_id: str) -> Deployment | None:
        with self._lock:
            found = self._alloc_deployments.get(alloc_id)
        return self.deployment(found) if found else None

    def deployment(self, deployment_id: str) -> Deployment:
        """The deployment, its health brought up to date; :class:`NotFound` if there is none."""
        with self._lock:
            found = self._deployments.get(deployment_id)
            if found is None:
                raise NotFound("deployment not found")
            self._follow(found)
            return found

    def deployments(self, job: str | None = None) -> list[Deployment]:
        """Newest first, as Nomad lists them."""
        with self._lock:
            found = [d for d in self._deployments.values() if job is None or d.job == job]
            for deployment in found:
                self._follow(deployment)
        return sorted(found, key=lambda d: d.create_index, reverse=True)

    def _follow(self, deployment: Deployment) -> None:
        """Bring the deployment's health up to date (the lock held)."""
        if deployment.status != "running":
            return
        now = time.time()
        healthy = {alloc_id: self._health(alloc_id, deployment, now) for alloc_id in deployment.allocs}
        status: DeploymentStatus = "running"
        description = deployment.description
        stopped = [alloc_id for alloc_id in deployment.allocs
                   if (alloc := self.agent.client.alloc(alloc_id)) is None or alloc.stopping]
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
            deployment.modify_index = self._bump()

    def _health(self, alloc_id: str, deployment: Deployment, now: float) -> bool | None:
        """An allocation's health as its group's update block judges it: False once a task failed
        or it outlived the healthy deadline unhealthy, True once every task ran ``min_healthy_time``
        (and, with ``health_check = "checks"``, every check passes)."""
        known = deployment.healthy.get(alloc_id)
        if known is not None:
            return known  # Nomad sets an allocation's health once
        alloc = self.agent.client.alloc(alloc_id)
        if alloc is None:
            return None
        update = deployment.groups[alloc.group.name]
        if alloc.failed or alloc.status == "failed":
            return False
        main = [t for t in alloc.tasks if t.task.is_main or t.task.is_sidecar]
        started = [t.status.started_at for t in main if t.status.state == "running" and not t.done]
        if len(started) == len(main) and all(s is not None and now - s >= update.min_healthy_time
                                             for s in started):
            checks = self.agent.health(alloc_id) if update.health_check == "checks" else {}
            if all(c["status"] == "passing" for task in checks.values() for c in task):
                return True
        if now - deployment.started > update.healthy_deadline:
            return False
        return None

    # -- jobs -------------------------------------------------------------------

    def version(self, job: str, job_id: str) -> int:
        """The version of job ``job`` that submission ``job_id`` is: how many other submissions
        of it the agent still knows came before."""
        return self.job_ids(job).index(job_id) if job_id in self.job_ids(job) else 0

    def job_ids(self, job: str) -> list[str]:
        """The submissions of job ``job`` still known, oldest first."""
        found: list[str] = []
        for alloc in self.agent.client.allocs:
            if alloc.job.name == job and alloc.job_id not in found:
                found.append(alloc.job_id)
        return found

    def created(self, alloc: AllocRunner) -> int:
        """When ``alloc`` was placed, in Unix nanoseconds."""
        alloc_id = alloc.alloc.id
        with self._lock:
            known = self._created.get(alloc_id)
        if known is None:
            record = self.agent.client.store.alloc(alloc_id)
            known = int((record.created_at if record else time.time()) * SECOND)
            with self._lock:
                self._created[alloc_id] = known
        return known
