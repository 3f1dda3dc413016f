"""The scheduler: a job's versions in, its allocations out, as Nomad's reconciler decides.

:meth:`Scheduler.submit` makes a changed job a new version, and brings the
job's live allocations to it group by group (see
:mod:`herder.jobspec.update_kind` for the kind of each update):

- an allocation whose index is beyond the group's new ``count`` is stopped
  (the highest indexes go, as in Nomad); an index no allocation has is placed;
- an allocation the update does not touch, or touches only in place, keeps
  running and takes the new version (its service registrations follow);
- the others are replaced: by a deployment (:mod:`herder.client.deployments`)
  for a group with an update strategy, else all at once, each replacement
  placed once the allocation it replaces is dead.

A scale, a revert and an auto_revert are submissions of a version too.
:meth:`Scheduler.place_replacement` is the one way to put a new allocation
in the place of one of the same version (a rescheduled one).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from herder.client.alloc_runner import AllocRunner
from herder.client.deployments import Deployment, Deployments, GroupDeployment
from herder.client.hooks.services import ServicesPlugin
from herder.client.runtime import shared_runtime
from herder.client.versions import Version, Versions, with_counts
from herder.errors import HerderError, JobError, PlacementError
from herder.jobspec.update_kind import UpdateKind, group_update
from herder.model import Group, Job
from herder.state import JobRecord, StateError, Store

log = logging.getLogger(__name__)


class Client(Protocol):
    """What the scheduler needs of its client (:class:`herder.client.client.Client`)."""

    store: Store

    @property
    def allocs(self) -> list[AllocRunner]: ...

    def alloc(self, alloc_id: str) -> AllocRunner | None: ...

    def checks(self, alloc_id: str) -> dict[str, list[dict[str, str]]]: ...

    def services(self) -> ServicesPlugin | None: ...

    def check_placeable(self, job: Job) -> None: ...

    def cancel_replacements(self, job_name: str) -> None: ...

    def place(self, job: Job, job_id: str, wanted: Sequence[tuple[Group, int]], *, record: JobRecord | None = None,
              also: Callable[[list[AllocRunner]], None] | None = None) -> list[AllocRunner]: ...

    def run(self, allocs: Iterable[AllocRunner]) -> None: ...

    def wait(self, allocs: Iterable[AllocRunner], timeout: float | None = None) -> bool: ...


class Scheduler:
    """Submissions of ``client``'s jobs, their versions and deployments. Thread-safe: one
    submission at a time."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._lock = threading.RLock()
        self.versions = Versions(client.store)
        self.deployments = Deployments(client.store, self)

    def start(self) -> None:
        """Follow the deployments, those an earlier agent left running too (its allocations restored first)."""
        self.deployments.load()
        self.deployments.start()

    def close(self) -> None:
        self.deployments.close()

    # -- submissions -------------------------------------------------------------

    def submit(self, job: Job, record: JobRecord, counts: Mapping[str, int] | None = None) -> tuple[Version, bool]:
        """Make ``job`` (submission ``record``, with ``counts`` over its groups' counts) the job's
        version, and bring its allocations to it; the version, and whether it is a new one (a
        job identical to the latest version makes none, and changes nothing while it runs).

        :raises PlacementError: a driver is unavailable, a task's user is denied, a port cannot
            be had or the state cannot be written; the running version stays.
        """
        job = with_counts(job, counts or {})
        try:
            return self._submit(job, record, counts or {})
        except StateError as exc:
            raise PlacementError(f"the job cannot be recorded: {exc}") from exc

    def _submit(self, job: Job, record: JobRecord, counts: Mapping[str, int]) -> tuple[Version, bool]:
        with self._lock:
            self._client.check_placeable(job)
            latest = self.versions.latest(job.name)
            live = self.live(job.name)
            if latest is not None and self._same(latest, job):
                if live:
                    return latest, False
                version = latest
            else:
                with self._client.store.transaction():
                    self._client.store.put_job(record)
                    version = self.versions.add(job.name, record.id, counts)
            self._reconcile(job, version, live)
            return version, version is not latest

    def scale(self, name: str, group: str, count: int) -> Version:
        """Make a version of job ``name`` with ``group`` at ``count`` allocations: placed or stopped in place.

        :raises JobError: the job has no version, or no such group.
        """
        with self._lock:
            latest = self.versions.latest(name)
            if latest is None:
                raise JobError([f"job {name!r} has no version to scale"])
            job = self.versions.load(latest)
            if group not in {g.name for g in job.groups}:
                raise JobError([f"job {name!r} has no group {group!r}"])
            assert latest.record is not None  # load() raised otherwise
            version, _ = self.submit(job, latest.record, {**latest.counts, group: count})
            return version

    def revert(self, name: str, number: int) -> Version:
        """Submit version ``number`` of job ``name`` again: a new version, as in Nomad.

        :raises JobError: no such version, or it cannot be loaded again.
        """
        with self._lock:
            old = self.versions.number(name, number)
            if old is None:
                raise JobError([f"job {name!r} has no version {number}"])
            job = self.versions.load(old)
            assert old.record is not None  # load() raised otherwise
            version, _ = self.submit(job, old.record, old.counts)
            return version

    def stop(self, name: str) -> list[AllocRunner]:
        """Stop every allocation of job ``name`` and end its deployment (returns at once)."""
        with self._lock:
            self.deployments.cancel(name, "Cancelled because job is stopped")
            allocs = [a for a in self._client.allocs if a.job.name == name]
            for alloc in allocs:
                alloc.stop()
            return allocs

    def live(self, name: str) -> list[AllocRunner]:
        """The allocations of job ``name`` that run and are not being stopped."""
        return [a for a in self._client.allocs
                if a.job.name == name and a.status in ("pending", "running") and not a.stopping]

    def _same(self, version: Version, job: Job) -> bool:
        try:
            return self.versions.load(version) == job
        except JobError:
            return False  # the latest version no longer loads: the new one replaces it

    # -- reconciling -------------------------------------------------------------

    def _reconcile(self, job: Job, version: Version, live: list[AllocRunner]) -> None:
        """Bring ``live`` to ``version`` of the job (``job``), group by group (the lock held)."""
        self._client.cancel_replacements(job.name)  # every index is placed here: none is rescheduled besides
        wanted = {group.name: group for group in job.groups}
        replace_now: list[AllocRunner] = []
        place_now: list[tuple[Group, int]] = []
        deployed: dict[str, GroupDeployment] = {}
        for alloc in live:
            if alloc.group.name not in wanted:
                alloc.stop()
        for group in job.groups:
            mine = sorted((a for a in live if a.group.name == group.name), key=lambda a: a.alloc.index)
            kept: dict[int, AllocRunner] = {}
            for alloc in mine:
                if alloc.alloc.index >= group.count or alloc.alloc.index in kept:
                    alloc.stop()  # scaled down: the highest indexes go
                else:
                    kept[alloc.alloc.index] = alloc
            destructive: dict[str, int] = {}
            for index, alloc in kept.items():
                kind = group_update(alloc.job, job, group.name)
                if kind is UpdateKind.DESTRUCTIVE:
                    destructive[alloc.alloc.id] = index
                elif kind is UpdateKind.IN_PLACE or alloc.job_id != version.job_id:
                    self._update_in_place(alloc, job, group, version)
            fresh = [index for index in range(group.count) if index not in kept]
            if group.update is None or not group.update.max_parallel:
                replace_now += [a for a in kept.values() if a.alloc.id in destructive]
                place_now += [(group, index) for index in [*fresh, *destructive.values()]]
            elif destructive or fresh:
                deployed[group.name] = GroupDeployment(
                    update=group.update, desired_total=group.count, to_replace=destructive, fresh=fresh,
                    desired_canaries=min(group.update.canary, len(destructive)))
        if place_now:
            self._place_all_at_once(job, version, replace_now, place_now)
        if deployed:
            self.deployments.begin(job.name, version.number, version.job_id, deployed)
        else:
            self.deployments.cancel(job.name, "Cancelled due to newer version of job")
            if not place_now:
                self.versions.mark_stable(version)  # nothing to deploy: the version runs as it is

    def _update_in_place(self, alloc: AllocRunner, job: Job, group: Group, version: Version) -> None:
        alloc.take_version(job, group, version.job_id)
        services = self._client.services()
        if services is not None:
            services.refresh(alloc.alloc.id)

    def _place_all_at_once(self, job: Job, version: Version, old: list[AllocRunner],
                           wanted: list[tuple[Group, int]]) -> None:
        """Place ``wanted`` without a deployment: at once, or once ``old`` (stopped here) is dead."""
        allocs = self._client.place(job, version.job_id, wanted)
        for alloc in old:
            alloc.stop()
        if old:
            # The old allocations' tasks may take their shutdown_delay and kill_timeout to die: the new ones
            # start after them, on the runners' pool (which outgrows a blocked worker), and no other
            # submission waits for that.
            shared_runtime().pool.submit(functools.partial(self._run_after, old, allocs))
        else:
            self._client.run(allocs)

    def _run_after(self, old: list[AllocRunner], new: list[AllocRunner]) -> None:
        self._client.wait(old)
        self._client.run(new)

    # -- what deployments ask ------------------------------------------------------

    def alloc(self, alloc_id: str) -> AllocRunner | None:
        return self._client.alloc(alloc_id)

    def checks(self, alloc_id: str) -> dict[str, list[dict[str, str]]]:
        return self._client.checks(alloc_id)

    def place_for(self, deployment: Deployment, group: str, indexes: list[int],
                  write: Callable[[list[AllocRunner]], None]) -> list[AllocRunner]:
        version = self.versions.number(deployment.job, deployment.version)
        if version is None:
            raise PlacementError(f"version {deployment.version} of job {deployment.job} is gone")
        try:
            job = self.versions.load(version)
        except JobError as exc:
            raise PlacementError(str(exc)) from exc
        found = next((g for g in job.groups if g.name == group), None)
        if found is None:
            raise PlacementError(f"version {deployment.version} of job {deployment.job} has no group {group}")
        # Checked at its submission, maybe by an earlier agent: a user denied since (and the agent
        # restarted) or a driver gone would have its next allocations placed and started anyway.
        self._client.check_placeable(job)
        allocs = self._client.place(job, version.job_id, [(found, index) for index in indexes], also=write)
        self._client.run(allocs)
        return allocs

    def deployed(self, deployment: Deployment) -> None:
        version = self.versions.number(deployment.job, deployment.version)
        if version is not None:
            self.versions.mark_stable(version)

    def failed(self, deployment: Deployment) -> None:
        """auto_revert: deploy the latest stable version before the failed one again (on the pool:
        the submission takes the scheduler's lock, which a submission may hold while it waits for
        the deployments')."""
        if self.deployments.paused():  # a rollback is a new version, which an ineligible agent takes none of
            self.deployments.tell(deployment, "not rolled back: the agent is not eligible")
            return
        stable = self.versions.stable(deployment.job, before=deployment.version)
        if stable is None:
            self.deployments.tell(deployment, "no stable version to roll back to")
            return
        failed = self.versions.number(deployment.job, deployment.version)
        try:
            same = failed is not None and self._same(failed, self.versions.load(stable))
        except JobError:
            same = False  # the revert says why it cannot load it
        if same:
            # As Nomad: the failed version is the stable one already (a rollback that failed too).
            # Rolling back again deployed the same job again, which failed again, for ever: a new
            # deployment and allocation each time, as fast as the task fails.
            self.deployments.tell(deployment, f"not rolled back: version {stable.number} is the same job")
            return
        shared_runtime().pool.submit(functools.partial(self._revert_to, deployment, stable.number))

    def _revert_to(self, deployment: Deployment, number: int) -> None:
        try:
            version = self.revert(deployment.job, number)
        except HerderError as exc:
            log.warning("job %s: cannot roll back to version %d: %s", deployment.job, number, exc)
            self.deployments.tell(deployment, f"cannot roll back to version {number}: {exc}")
            return
        self.deployments.tell(deployment, f"rolled back to version {number} (as version {version.number})")
        log.info("job %s: deployment %s failed, rolled back to version %d", deployment.job, deployment.id, number)

    # -- rescheduling ------------------------------------------------------------

    def place_replacement(self, previous: AllocRunner,
                          also: Callable[[list[AllocRunner]], None] | None = None) -> AllocRunner:
        """Place a replacement for allocation ``previous``: the same version of its job (its
        submission as ``previous`` runs it), group and index, with what ``also`` writes in the same
        transaction. When a deployment placed ``previous``, the replacement takes its place there,
        in that transaction too. It is not running yet: the client's ``run`` starts it.

        :raises PlacementError: it cannot be placed (the job's submission is gone, a port is held...).
        """
        with self._lock:
            if self._client.store.job(previous.job_id) is None:
                raise PlacementError(f"the job of allocation {previous.alloc.name} is not in the state database")

            def place(write: Callable[[list[AllocRunner]], None] | None) -> list[AllocRunner]:
                def both(runners: list[AllocRunner]) -> None:
                    for step in (write, also):
                        if step is not None:
                            step(runners)

                return self._client.place(previous.job, previous.job_id, [(previous.group, previous.alloc.index)],
                                          also=both)

            (alloc,) = self.deployments.replace(previous.alloc.id, place)
            return alloc
