"""Deployments: a job version's new allocations placed as its groups' ``update`` blocks say.

A deployment replaces the allocations of older versions that an update
cannot change in place (see :mod:`herder.jobspec.update_kind`), and places the
indexes a group lacks, as Nomad's scheduler and deployment watcher do:

- with ``canary = N``, N canaries of the new version are placed beside the
  old allocations; nothing else moves until they are promoted (``promote``,
  or ``auto_promote`` once every canary is healthy). A promoted canary takes
  the place of the old allocation of its index, which is stopped.
- then at most ``max_parallel`` allocations are in flight: an old one stopped
  and its replacement not yet healthy counts as one. An old allocation is
  stopped first, its replacement placed (at its index) once it is dead, so
  static ports and every task's ``kill_timeout`` are respected.
- an allocation is healthy once its main tasks and sidecars have run for
  ``min_healthy_time`` (``task_states``) and its service checks pass
  (``checks``), or when told so (``manual``, :meth:`Deployments.set_health`);
  it is unhealthy once a task failed, it stopped, or ``healthy_deadline``
  passed first. Its health, once known, stays.
- the deployment succeeds once every group has its count of healthy
  allocations of the new version and nothing is left to replace (the version
  becomes stable); it fails when a group makes no progress (no allocation
  turned healthy) for ``progress_deadline``, or, with no progress deadline,
  at the first unhealthy allocation. Of a failed deployment with
  ``auto_revert``, the last stable version is deployed again.

Every step is written to the state database with the allocations it places
(one transaction), and a restarted agent continues the deployments it finds
running or paused where they were: an allocation is never placed twice.
One thread follows the running deployments: at once when a task of theirs
starts (:meth:`Deployments.wake`) or an allocation they stopped is dead, when
an allocation's ``min_healthy_time`` is up, and every :data:`TICK` seconds for
the rest (service checks, deadlines). A rolling update so moves on as soon as
each wave allows, not on the next tick.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from herder import events
from herder.client.alloc_runner import AllocRunner
from herder.client.runtime import shared_runtime
from herder.errors import HerderError
from herder.model import Update
from herder.state import DeploymentRecord, DeploymentStatus, StateError, Store

log = logging.getLogger(__name__)

TICK = 0.2
"""How often (seconds) the running deployments are followed."""

ACTIVE: tuple[DeploymentStatus, ...] = ("running", "paused")

Checks = Callable[[str], dict[str, list[dict[str, str]]]]
"""The service checks of an allocation, by task, each with its ``status``."""


class DeploymentError(HerderError):
    """A deployment cannot do what it is asked (promote a deployment without canaries, resume a failed one...)."""


@dataclass
class Placed:
    """An allocation a deployment placed: its index, whether it is a canary, when it was placed
    (Unix seconds) and its health (None while not known)."""

    index: int
    canary: bool = False
    placed_at: float = 0.0
    healthy: bool | None = None


@dataclass
class GroupDeployment:
    """The progress of one group: ``to_replace`` are the old allocations still to replace
    (id -> index, in order), ``replacing`` those stopped whose replacement is placed once they
    are dead, ``fresh`` the indexes to place that no allocation had."""

    update: Update
    desired_total: int
    desired_canaries: int = 0
    promoted: bool = False
    to_replace: dict[str, int] = field(default_factory=dict)
    replacing: dict[str, int] = field(default_factory=dict)
    fresh: list[int] = field(default_factory=list)
    placed: dict[str, Placed] = field(default_factory=dict)
    progress_by: float = 0.0
    """When the group must have made progress (an allocation turned healthy) by; 0 for no deadline."""

    @property
    def canaries(self) -> list[str]:
        return [alloc_id for alloc_id, p in self.placed.items() if p.canary]

    @property
    def healthy(self) -> int:
        return sum(p.healthy is True for p in self.placed.values())

    @property
    def unhealthy(self) -> int:
        return sum(p.healthy is False for p in self.placed.values())

    @property
    def awaiting_promotion(self) -> bool:
        """Every canary placed and healthy, waiting to be promoted."""
        canaries = self.canaries
        return (not self.promoted and self.desired_canaries > 0 and len(canaries) == self.desired_canaries
                and all(self.placed[c].healthy for c in canaries))

    @property
    def done(self) -> bool:
        """Nothing left to place or replace, and every allocation placed healthy."""
        return (not self.to_replace and not self.replacing and not self.fresh
                and (self.promoted or not self.desired_canaries) and all(p.healthy for p in self.placed.values()))


@dataclass
class Deployment:
    """The deployment of version ``version`` (submission ``job_id``) of job ``job``, by group.
    ``revision`` counts its changes, for watchers."""

    id: str
    job: str
    version: int
    job_id: str
    groups: dict[str, GroupDeployment]
    created: float = field(default_factory=time.time)
    status: DeploymentStatus = "running"
    description: str = "Deployment is running"
    revision: int = 0

    @property
    def allocs(self) -> list[str]:
        return [alloc_id for group in self.groups.values() for alloc_id in group.placed]

    @property
    def healthy(self) -> dict[str, bool | None]:
        """Each placed allocation's health, None while it is not known."""
        return {alloc_id: p.healthy for group in self.groups.values() for alloc_id, p in group.placed.items()}

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def record(self) -> DeploymentRecord:
        state = {"job_id": self.job_id, "revision": self.revision,
                 "groups": {name: dataclasses.asdict(group) for name, group in self.groups.items()}}
        return DeploymentRecord(id=self.id, job=self.job, version=self.version, status=self.status,
                                description=self.description, state=state, created_at=self.created,
                                modified_at=time.time())

    @classmethod
    def of_record(cls, record: DeploymentRecord) -> Deployment:
        groups = {}
        for name, group in record.state.get("groups", {}).items():
            placed = {alloc_id: Placed(**p) for alloc_id, p in group["placed"].items()}
            groups[name] = GroupDeployment(**{**group, "update": Update(**group["update"]), "placed": placed})
        return cls(id=record.id, job=record.job, version=record.version, job_id=record.state.get("job_id", ""),
                   groups=groups, created=record.created_at, status=record.status, description=record.description,
                   revision=record.state.get("revision", 0))


class Host(Protocol):
    """What a deployment needs of its client: its allocations, and placing more."""

    def alloc(self, alloc_id: str) -> AllocRunner | None: ...

    def checks(self, alloc_id: str) -> dict[str, list[dict[str, str]]]: ...

    def place_for(self, deployment: Deployment, group: str, indexes: list[int],
                  write: Callable[[list[AllocRunner]], None]) -> list[AllocRunner]:
        """Place and start allocations of the deployment's version at ``indexes``; ``write`` is
        given them, and writes the deployment, in the transaction that records them."""
        ...

    def deployed(self, deployment: Deployment) -> None:
        """The deployment succeeded."""
        ...

    def failed(self, deployment: Deployment) -> None:
        """The deployment failed (auto_revert's turn)."""
        ...


class Deployments:
    """Every deployment of this client, followed by one thread once :meth:`start` ran. Thread-safe."""

    def __init__(self, store: Store, host: Host) -> None:
        self._store = store
        self._host = host
        self._lock = threading.RLock()
        self._deployments: dict[str, Deployment] = {}
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._due = 0.0
        """The earliest time (0: none) an allocation's min_healthy_time is up, as the last step saw."""
        self._thread: threading.Thread | None = None
        self.paused: Callable[[], bool] = lambda: False
        """Whether nothing may be placed now (an agent marked ineligible): every deployment waits."""

    # -- lifetime ------------------------------------------------------------

    def load(self) -> None:
        """Know the deployments the state database holds (an earlier agent's: the active ones go on)."""
        with self._lock:
            for record in self._store.deployments():
                self._deployments.setdefault(record.id, Deployment.of_record(record))

    def start(self) -> None:
        """Follow the active deployments until :meth:`close`."""
        self._thread = threading.Thread(target=self._run, name="herder-deployments", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()

    def wake(self) -> None:
        """Follow the deployments now: something they wait for may have happened (a task started)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                due = self._due
            self._wake.wait(min(TICK, max(0.0, due - time.time())) if due else TICK)
            self._wake.clear()  # before the step, which sees whatever a wake since then was for
            if not self._stop.is_set():
                self.tick()

    def _wake_when_dead(self, alloc: AllocRunner) -> None:
        alloc.wait()
        self.wake()

    # -- reading -------------------------------------------------------------

    def get(self, deployment_id: str) -> Deployment | None:
        with self._lock:
            return self._deployments.get(deployment_id)

    def of(self, alloc_id: str) -> Deployment | None:
        """The deployment that placed the allocation, if one did."""
        with self._lock:
            return next((d for d in reversed(self._deployments.values()) if alloc_id in d.healthy), None)

    def of_job(self, job: str | None = None) -> list[Deployment]:
        """The deployments of ``job`` (of every job: None), newest first."""
        with self._lock:
            found = [d for d in self._deployments.values() if job is None or d.job == job]
        return found[::-1]  # made in order

    # -- changes ---------------------------------------------------------------

    def begin(self, job: str, version: int, job_id: str, groups: Mapping[str, GroupDeployment]) -> Deployment:
        """Deploy version ``version`` of ``job``: the active deployments of the job are cancelled."""
        now = time.time()
        for group in groups.values():
            group.progress_by = now + group.update.progress_deadline if group.update.progress_deadline else 0.0
        deployment = Deployment(id=str(uuid.uuid4()), job=job, version=version, job_id=job_id, groups=dict(groups),
                                created=now)
        with self._lock:
            self.cancel(job, "Cancelled due to newer version of job")
            self._save(deployment)  # a StateError here leaves no deployment behind
            self._deployments[deployment.id] = deployment
            self._step(deployment)
        return deployment

    def cancel(self, job: str, description: str) -> None:
        """End the active deployments of ``job`` (a newer version, or the job stopped)."""
        with self._lock:
            for deployment in self._deployments.values():
                if deployment.job == job and deployment.active:
                    self._end(deployment, "cancelled", description)

    def promote(self, deployment_id: str, groups: Iterable[str] = ()) -> Deployment:
        """Promote the canaries of ``groups`` (every group: none named).

        :raises DeploymentError: the deployment is not active, has no canaries, or they are not all healthy."""
        with self._lock:
            deployment = self._active(deployment_id)
            names = list(groups) or [n for n, g in deployment.groups.items() if g.desired_canaries]
            unknown = [n for n in names if n not in deployment.groups]
            if unknown:
                raise DeploymentError(f"deployment has no group {', '.join(unknown)}")
            if not any(deployment.groups[n].desired_canaries for n in names):
                raise DeploymentError("no canaries to promote")
            waiting = [n for n in names if not deployment.groups[n].promoted
                       and deployment.groups[n].desired_canaries and not deployment.groups[n].awaiting_promotion]
            if waiting:
                raise DeploymentError(f"group {', '.join(waiting)} has canaries that are not all healthy yet")
            for name in names:
                self._promote(deployment, deployment.groups[name])
            self._changed(deployment)
            self._advance(deployment)
            return deployment

    def fail(self, deployment_id: str) -> Deployment:
        """Fail the deployment (by hand): nothing more is placed; with auto_revert the last
        stable version is deployed again."""
        with self._lock:
            deployment = self._active(deployment_id)
            self._failed(deployment, "Deployment marked as failed")
            return deployment

    def pause(self, deployment_id: str, paused: bool) -> Deployment:
        """Pause the deployment (nothing more is placed; health is followed), or resume it."""
        with self._lock:
            deployment = self._active(deployment_id)
            if paused:
                deployment.status, deployment.description = "paused", "Deployment is paused"
            else:
                deployment.status, deployment.description = "running", "Deployment is running"
            self._changed(deployment)
            return deployment

    def set_health(self, deployment_id: str, healthy: Iterable[str], unhealthy: Iterable[str]) -> Deployment:
        """Set the health of allocations of a deployment (``health_check = "manual"``; any, as Nomad).

        :raises DeploymentError: the deployment is not active, or did not place an allocation named."""
        with self._lock:
            deployment = self._active(deployment_id)
            known = deployment.healthy
            wanted = [(alloc_id, True) for alloc_id in healthy] + [(alloc_id, False) for alloc_id in unhealthy]
            missing = [alloc_id for alloc_id, _ in wanted if alloc_id not in known]
            if missing:
                raise DeploymentError(f"deployment has no allocation {', '.join(missing)}")
            now = time.time()
            for alloc_id, health in wanted:
                for group in deployment.groups.values():
                    if alloc_id in group.placed:
                        self._set_health(deployment, group, alloc_id, health, now)
            self._changed(deployment)
            self._advance(deployment)
            return deployment

    def forget(self, job: str) -> None:
        """Forget the deployments of ``job`` (collected with its last allocation)."""
        with self._lock:
            for deployment in [d for d in self._deployments.values() if d.job == job]:
                del self._deployments[deployment.id]

    def replace(self, previous: str,
                place: Callable[[Callable[[list[AllocRunner]], None] | None], list[AllocRunner]]
                ) -> list[AllocRunner]:
        """Place a replacement of allocation ``previous`` by ``place``, given what to write with it:
        when an active deployment placed ``previous``, the replacement takes its place there (its
        index, canary or not, its health not known yet), written in the transaction that records it."""
        with self._lock:  # before the transaction, as a tick takes them
            deployment = next((d for d in self._deployments.values() if d.active and previous in d.healthy), None)
            group = next((g for g in deployment.groups.values() if previous in g.placed), None) if deployment else None
            if deployment is None or group is None:
                return place(None)

            def write(allocs: list[AllocRunner]) -> None:
                was = group.placed.pop(previous)
                for alloc in allocs:
                    group.placed[alloc.alloc.id] = Placed(index=was.index, canary=was.canary, placed_at=time.time())
                deployment.revision += 1
                self._store.put_deployment(deployment.record())

            return place(write)

    # -- following -------------------------------------------------------------

    def tick(self) -> None:
        """Move every active deployment on by what happened since the last tick."""
        with self._lock:
            self._due = 0.0
            for deployment in [d for d in self._deployments.values() if d.active]:
                self._step(deployment)

    def _step(self, deployment: Deployment) -> None:
        try:
            self._advance(deployment)
        except StateError as exc:  # kept in memory; a later step writes it
            log.warning("deployment %s: %s", deployment.id, exc)

    def _advance(self, deployment: Deployment) -> None:
        """One step of the deployment (the lock held): health, deadlines, placements, the outcome."""
        now = time.time()
        for group in deployment.groups.values():
            for alloc_id, placed in group.placed.items():
                if placed.healthy is None:
                    health = self._health(alloc_id, placed, group.update, now)
                    if health is not None:
                        self._set_health(deployment, group, alloc_id, health, now)
        for group in deployment.groups.values():
            if group.unhealthy and not group.update.progress_deadline:
                return self._failed(deployment, "Failed due to unhealthy allocations")
            if group.progress_by and now > group.progress_by and not group.done and not group.awaiting_promotion:
                return self._failed(deployment, "Failed due to progress deadline")
        if deployment.status == "running" and not self.paused():  # an ineligible agent's placed on
            for name, group in deployment.groups.items():
                self._place(deployment, name, group)
        if deployment.status == "running" and all(group.done for group in deployment.groups.values()):
            self._end(deployment, "successful", "Deployment completed successfully")
            self._tell(deployment, f"deployment of version {deployment.version} successful: it is stable")
            self._host.deployed(deployment)

    def _place(self, deployment: Deployment, name: str, group: GroupDeployment) -> None:
        """Place what the group may place now (the lock held)."""
        for old in list(group.replacing):
            alloc = self._host.alloc(old)
            if alloc is not None and not alloc.stopping:
                alloc.stop()  # stopped by an agent that died before it was done
            if alloc is None or alloc.wait(0):
                self._place_at(deployment, name, group, [group.replacing[old]], False, replaced=[old])
        if group.desired_canaries and not group.promoted:
            missing = group.desired_canaries - len(group.canaries)
            taken = {group.placed[c].index for c in group.canaries}
            indexes = [index for index in group.to_replace.values() if index not in taken][:missing]
            if indexes:
                self._place_at(deployment, name, group, indexes, True)
            if group.awaiting_promotion and group.update.auto_promote:
                self._promote(deployment, group)
                self._changed(deployment)
            else:
                return
        if group.fresh:
            self._place_at(deployment, name, group, list(group.fresh), False)
        in_flight = len(group.replacing) + sum(p.healthy is not True for p in group.placed.values())
        limit = group.update.max_parallel - in_flight if group.update.max_parallel else len(group.to_replace)
        stopping = list(group.to_replace)[:max(0, limit)]
        for old in stopping:
            group.replacing[old] = group.to_replace.pop(old)
        if stopping:
            self._changed(deployment)  # written first: an agent that dies now stops them when it is back
        for old in stopping:
            alloc = self._host.alloc(old)
            if alloc is not None:
                alloc.stop()
                # Its replacement is placed once it is dead (on the runners' pool, which outgrows a
                # blocked worker: the kill may take the task's shutdown_delay and kill_timeout).
                shared_runtime().pool.submit(functools.partial(self._wake_when_dead, alloc))

    def _place_at(self, deployment: Deployment, name: str, group: GroupDeployment, indexes: list[int],
                  canary: bool, replaced: Iterable[str] = ()) -> None:
        """Place allocations at ``indexes``, written with the deployment's new state."""
        replaced = list(replaced)

        def write(placing: list[AllocRunner]) -> None:
            now = time.time()
            for alloc in placing:
                group.placed[alloc.alloc.id] = Placed(index=alloc.alloc.index, canary=canary, placed_at=now)
            for old in replaced:
                del group.replacing[old]
            group.fresh = [index for index in group.fresh if index not in indexes]
            deployment.revision += 1
            self._store.put_deployment(deployment.record())

        try:
            self._host.place_for(deployment, name, indexes, write)
        except HerderError as exc:
            self._failed(deployment, f"Failed to place allocations: {exc}")

    def _health(self, alloc_id: str, placed: Placed, update: Update, now: float) -> bool | None:
        """An allocation's health as its group's update strategy judges it (None: not known yet)."""
        alloc = self._host.alloc(alloc_id)
        if alloc is None or alloc.failed or alloc.status in ("failed", "complete", "stopped"):
            return False
        if update.health_check != "manual":
            main = [t for t in alloc.tasks if t.task.is_main or t.task.is_sidecar]
            started = [t.status.started_at for t in main if t.status.state == "running" and not t.done]
            starts = [s for s in started if s is not None]
            if len(starts) == len(main):
                ready = max(starts, default=0.0) + update.min_healthy_time
                if now < ready:
                    self._due = min(self._due or ready, ready)
                else:
                    checks = self._host.checks(alloc_id) if update.health_check == "checks" else {}
                    if all(c["status"] == "passing" for task in checks.values() for c in task):
                        return True
        if now - placed.placed_at > update.healthy_deadline:
            return False
        return None

    def _set_health(self, deployment: Deployment, group: GroupDeployment, alloc_id: str, health: bool,
                    now: float) -> None:
        placed = group.placed[alloc_id]
        if placed.healthy is not None:
            return
        placed.healthy = health
        if health and group.update.progress_deadline:
            group.progress_by = now + group.update.progress_deadline
        self._changed(deployment)
        alloc = self._host.alloc(alloc_id)
        if alloc is not None:
            _emit(alloc, f"version {deployment.version}: allocation {'healthy' if health else 'unhealthy'}, "
                         f"{group.healthy} of {group.desired_total} healthy")

    def _promote(self, deployment: Deployment, group: GroupDeployment) -> None:
        """The group's canaries take the place of the old allocations of their indexes."""
        group.promoted = True
        indexes = {group.placed[c].index for c in group.canaries}
        for old, index in list(group.to_replace.items()):
            if index in indexes:
                del group.to_replace[old]
                alloc = self._host.alloc(old)
                if alloc is not None:
                    alloc.stop()
        self._tell(deployment, f"version {deployment.version}: canaries promoted")

    def _failed(self, deployment: Deployment, description: str) -> None:
        auto_revert = any(group.update.auto_revert for group in deployment.groups.values())
        self._end(deployment, "failed", description)
        self._tell(deployment, f"deployment of version {deployment.version} failed: {description}")
        if auto_revert:
            self._host.failed(deployment)

    def _end(self, deployment: Deployment, status: DeploymentStatus, description: str) -> None:
        deployment.status, deployment.description = status, description
        self._changed(deployment)

    def _changed(self, deployment: Deployment) -> None:
        deployment.revision += 1
        self._save(deployment)

    def _save(self, deployment: Deployment) -> None:
        self._store.put_deployment(deployment.record())

    def _active(self, deployment_id: str) -> Deployment:
        deployment = self._deployments.get(deployment_id)
        if deployment is None:
            raise KeyError(deployment_id)
        if not deployment.active:
            raise DeploymentError(f"deployment {deployment_id} is {deployment.status}: it can no longer change")
        return deployment

    def tell(self, deployment: Deployment, message: str) -> None:
        """Say ``message`` to the allocations the deployment placed, as a ``Deployment`` event."""
        with self._lock:
            self._tell(deployment, message)

    def _tell(self, deployment: Deployment, message: str) -> None:
        for alloc_id in deployment.allocs:  # finished ones too: a failed allocation is where one looks
            alloc = self._host.alloc(alloc_id)
            if alloc is not None:
                _emit(alloc, message)


def _emit(alloc: AllocRunner, message: str) -> None:
    """A ``Deployment`` event on each of the allocation's tasks."""
    for task in alloc.tasks:
        task.emit(events.DEPLOYMENT, message)
