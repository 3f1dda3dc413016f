"""The client: the one long-lived owner of this process's allocations.

A :class:`Client` holds the state database, the session with the data dir's
process supervisor, the port allocator and the drivers' fingerprints, and the
allocations: it places and runs new ones (:meth:`Client.submit`), takes over
the ones an earlier herder left running (:meth:`Client.restore`), and stops
them. Every front end (``herder run``, the agent) is a thin layer over it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from herder import events
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.config import Config
from herder.client.deferred import DeferredCleanups
from herder.client.feasibility import Feasibility, default_checkers
from herder.client.fingerprints import FINGERPRINT_INTERVAL, Fingerprints
from herder.client.health import HealthChange
from herder.client.hooks import builtin_plugins
from herder.client.hooks.services import ServicesPlugin
from herder.client.network import AllocNetworks
from herder.client.node import Node, node_of
from herder.client.placement import PlacedAlloc, Placement
from herder.client.ports import PortAllocator
from herder.client.replacements import Replacements
from herder.client.reschedule import RescheduleEvent
from herder.client.runtime import shared_runtime
from herder.client.scheduler import Scheduler
from herder.client.sessions import SessionLock, is_alive
from herder.client.signing import IdentitySigner
from herder.client.task_runner import TaskRunner
from herder.client.taskdir import make_data_dir, move_alloc_data
from herder.client.users import denied_users
from herder.context import AllocatedPort, TaskContext
from herder.errors import HerderError, JobError, PlacementError
from herder.jobspec import interpolate_task, load_job_text
from herder.model import Group, Job, Task
from herder.objects import TaskEvent
from herder.plugins.hooks import Hooks
from herder.sdk import UnsafePathError
from herder.state import (
    LIVE_STATUSES,
    AllocRecord,
    AllocStatus,
    JobRecord,
    PortRecord,
    PreviousRecord,
    StateError,
    Store,
    TaskRecord,
    job_id,
)
from herder.supervisor import Supervisor

log = logging.getLogger(__name__)

STATE_FILE = "state.db"


@dataclass(frozen=True)
class JobSource:
    """A job file as submitted: what rebuilds the job after a restart."""

    text: str
    format: str
    source: str
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return job_id(self.format, self.text, self.variables)

    def record(self, name: str) -> JobRecord:
        """The submission as the state database keeps it (``name``: its job's)."""
        return JobRecord(id=self.id, name=name, source=self.source, format=self.format, text=self.text,
                         variables=dict(self.variables), created_at=time.time())


class Client:
    """Owns the allocations of one herder process on one data dir.

    ``keep`` says whether this process's tasks outlive it: an agent's do; a
    foreground ``herder run``'s are stopped by the supervisor when it dies,
    which then runs ``on_lost`` (``{"argv": [...], "env": {...}}``) to clean
    up what is left. ``on_event`` sees every task event of every allocation,
    ``on_health`` every change of a service check's status.

    When the state database cannot be written (a full disk, say), every task
    is told by a ``State Write Failed`` event; with ``keep`` false the tasks
    are stopped and their allocations fail, else they run on and what they
    do is written once the database can be written again.
    """

    def __init__(self, config: Config, hooks: Hooks, *, keep: bool = True, on_lost: dict[str, Any] | None = None,
                 on_event: Callable[[EventRecord], None] | None = None,
                 on_health: Callable[[HealthChange], None] | None = None,
                 fingerprint_interval: float = FINGERPRINT_INTERVAL) -> None:
        self.config = config
        self.hooks = hooks
        self.keep = keep
        self.session = uuid.uuid4().hex
        self.data_dir = config.data_dir
        make_data_dir(self.data_dir)
        self._session_lock = SessionLock(self.data_dir, self.session)
        self._allocs: dict[str, AllocRunner] = {}
        self._lock = threading.Lock()
        self.store = Store(self.data_dir / STATE_FILE, on_failure=self._state_failed,
                           on_recovery=self._state_recovered)
        self.supervisor = Supervisor(self.data_dir, session=self.session, keep=keep, on_lost=on_lost)
        self.ports = PortAllocator(config.ports.min, config.ports.max, config.ports.reserved,
                                   host_ip=config.ports.host_ip)
        if on_lost is not None:
            # Now, not on the first supervised process: a session whose tasks are all
            # containers must still have its on_lost run if this process dies.
            self.supervisor.connect()
        self.placement = Placement(self.data_dir, self.ports, self.supervisor, config.client.host_volumes)
        self.networks = AllocNetworks(config.client, self.store, hooks)
        """The allocations' network namespaces (group ``network { mode = "bridge" }``)."""
        self.fingerprints = Fingerprints(hooks, fingerprint_interval)
        self.feasibility = Feasibility(default_checkers(self.data_dir, self.fingerprints.get,
                                                          config.client.host_volumes))
        """What the node checks of a job before placing it, besides its drivers and users."""
        self.deferred = DeferredCleanups(self.store, hooks, self._rebuild_task)
        """The cleanup steps to finish later, of this herder's tasks and of earlier ones' on the data dir."""
        self._on_event = on_event or (lambda record: None)
        self.on_health = on_health or (lambda change: None)
        self.on_alloc_done: Callable[[AllocRunner], None] = lambda alloc: None
        """Told of each allocation whose tasks are all dead and cleaned up, its status final
        (the agent's event stream sets it, after the agent is made)."""
        self.signer = IdentitySigner(self.data_dir)
        """Signs the tasks' workload identities; its key is made on first use."""
        self.builtins = builtin_plugins(self)
        hooks.add_builtins((plugin.name, plugin) for plugin in self.builtins)
        self.scheduler = Scheduler(self)
        """The agent's submissions: versions, updates and deployments."""
        self.versions = self.scheduler.versions
        self.deployments = self.scheduler.deployments
        self.replacements = Replacements(self)
        """The failed allocations to replace, each after its group's reschedule delay."""

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the node ------------------------------------------------------------

    def node(self) -> Node:
        """This host as job files see it (:func:`herder.client.node.node_of`), with the drivers' latest fingerprints."""
        return node_of(self.config, {driver: self.fingerprints.get(driver) for driver in self.hooks.drivers})

    def check_placeable(self, job: Job) -> None:
        """:raises PlacementError: a driver of ``job`` is unavailable, or a task's user is denied;
            :class:`Infeasible` (one) when a group does not fit the node (its datacenters, constraints,
            disk: :attr:`feasibility`)."""
        for driver in sorted({t.driver for g in job.groups for t in g.tasks}):
            fingerprint = self.fingerprints.get(driver)
            if not (fingerprint.detected and fingerprint.healthy):
                raise PlacementError(f"driver {driver} is not available: {fingerprint.description}")
        denied = denied_users(job, self.config.client)
        if denied:
            raise PlacementError("; ".join(denied))
        self.feasibility.require(job, self.node())

    # -- allocations -------------------------------------------------------

    @property
    def allocs(self) -> list[AllocRunner]:
        with self._lock:
            return list(self._allocs.values())

    def alloc(self, alloc_id: str) -> AllocRunner | None:
        with self._lock:
            return self._allocs.get(alloc_id)

    def services(self) -> ServicesPlugin | None:
        """The built-in plugin that registers the tasks' services and runs their checks."""
        return next((p for p in self.builtins if isinstance(p, ServicesPlugin)), None)

    def checks(self, alloc_id: str) -> dict[str, list[dict[str, str]]]:
        """The service checks of an allocation, by task."""
        services = self.services()
        return services.health(alloc_id) if services is not None else {}

    def created_at(self, alloc_id: str) -> float | None:
        """When the allocation was placed (Unix seconds); None for one the state database does not have."""
        record = self.store.alloc(alloc_id)
        return record.created_at if record else None

    def task_runner(self, ctx: TaskContext) -> TaskRunner | None:
        """The runner of the task ``ctx`` belongs to, while its allocation is here."""
        alloc = self.alloc(ctx.alloc_id)
        return next((runner for runner in alloc.tasks if runner.name == ctx.task_name), None) if alloc else None

    def submit(self, job: Job, source: JobSource) -> list[AllocRunner]:
        """Place every allocation of ``job`` and record them; all or nothing (``herder run``'s:
        the agent's submissions go through :attr:`scheduler`).

        The allocations are not running yet: :meth:`run` starts them.

        :raises PlacementError: see :meth:`place`.
        """
        self.check_placeable(job)
        placed = self.place(job, source.id, [(g, index) for g in job.groups for index in range(g.count)],
                            record=source.record(job.name))
        self.cancel_replacements(job.name)  # what the job needs is placed now
        return placed

    def place(self, job: Job, job_id: str, wanted: Sequence[tuple[Group, int]], *, record: JobRecord | None = None,
              also: Callable[[list[AllocRunner]], None] | None = None) -> list[AllocRunner]:
        """Place allocations of submission ``job_id`` of ``job`` (each group at an index) and record
        them, with ``record`` (the submission, if not stored yet) and what ``also`` writes, in one
        transaction; all or nothing. They are not running yet: :meth:`run` starts them.

        :raises PlacementError: a port cannot be had or the allocations cannot be recorded (the
            state database cannot be written); nothing is left placed.
        """
        node = self.node()
        placed: list[PlacedAlloc] = []
        try:
            for group, index in wanted:
                placed.append(self.placement.place(job, group, index, node))
        except BaseException:
            for alloc in placed:
                self.placement.release(alloc)
            raise
        now = time.time()
        previous = self._previous(job)
        try:
            with self.store.transaction():
                if record is not None:
                    self.store.put_job(record)
                for alloc in placed:
                    self.store.put_alloc(self._alloc_record(alloc, job_id, now), _task_records(alloc),
                                         _port_records(alloc))
                    before = previous.get((alloc.group.name, alloc.alloc.index))
                    if before is not None:
                        self.store.put_previous(PreviousRecord(alloc_id=alloc.alloc.id, previous=before))
                runners = [self._adopt(alloc, job_id) for alloc in placed]
                if also is not None:
                    also(runners)  # after the sticky links above: a replacement's own link replaces them
        except StateError as exc:
            for alloc in placed:
                self.forget(alloc.alloc.id)
                self.placement.release(alloc)
            raise PlacementError(f"the allocations cannot be recorded: {exc}") from exc
        return runners

    def _previous(self, job: Job) -> dict[tuple[str, int], str]:
        """The allocation each new one of ``job`` replaces, by group and index, in the groups whose
        ``alloc/data`` follows (``ephemeral_disk``): the latest of that group and index."""
        carried = {group.name for group in job.groups if group.ephemeral_disk.carried}
        return {(alloc.group.name, alloc.alloc.index): alloc.alloc.id for alloc in self.allocs
                if alloc.job.name == job.name and alloc.group.name in carried}

    def cancel_replacements(self, job_name: str) -> None:
        """Forget the pending replacements of job ``job_name``'s failed allocations (its indexes are
        placed anew)."""
        self.replacements.cancel(job_name)

    def place_replacement(self, previous: AllocRunner, tracker: Sequence[RescheduleEvent], *,
                          done: tuple[str, str] | None = None) -> AllocRunner:
        """Place one allocation in place of ``previous`` (through :attr:`scheduler`: in its
        deployment, if one placed ``previous``), naming ``previous`` as the one it replaces and
        carrying ``tracker`` (its reschedule tracker: none for an allocation stopped alone, as
        ``nomad alloc stop`` does). It is not running yet: :meth:`run` starts it (with the previous
        ``alloc/data`` where the group's ``ephemeral_disk`` says). ``done`` is deferred work (kind,
        key) that this placement finishes, in the same transaction.

        :raises PlacementError: as :meth:`place` (a static port ``previous`` still holds, say);
            nothing is left placed.
        """
        self.check_placeable(previous.job)

        def link(runners: list[AllocRunner]) -> None:
            for runner in runners:
                self.store.put_previous(PreviousRecord(alloc_id=runner.alloc.id, previous=previous.alloc.id,
                                                       events=[dataclasses.asdict(event) for event in tracker]))
            if done is not None:
                self.store.done(*done)

        return self.scheduler.place_replacement(previous, link)

    def restore(self, *, job_name: str | None = None, session: str | None = None,
                keep: bool | None = None, history: bool = False) -> list[AllocRunner]:
        """Take over the live allocations an earlier herder left on this data dir.

        Only allocations whose owning process is dead are taken (``job_name``,
        ``session`` and ``keep`` narrow the choice). Their running tasks are
        reattached when :meth:`run` starts them; an allocation that cannot be
        restored (its job no longer loads, its ports are held, a task left a
        link where its directories were) is failed, and what of it still runs
        is stopped before this returns (see :meth:`_fail_restore`). The network
        namespaces of allocations that are over are removed.

        With ``history``, the finished allocations are taken too, as read-only
        records of what happened (see :meth:`_recall`), so that an agent started
        again lists what the last one did until garbage collection removes it;
        they are not returned, as there is nothing of them to run.
        """
        restored: list[AllocRunner] = []
        node = self.node()
        alive: dict[str, bool] = {}  # by session: a data dir's history holds many allocations of few sessions
        for record in self.store.allocs(job_name=job_name, live=None if history else True, session=session):
            if keep is not None and record.keep != keep:
                continue
            if record.session == self.session:
                continue
            if record.session not in alive:
                alive[record.session] = is_alive(self.data_dir, record.session)
            if alive[record.session]:
                continue
            if record.status not in LIVE_STATUSES:
                self._recall(record, node)
                continue
            if not self.store.claim_alloc(record.id, owner=record.session, by=self.session, keep=self.keep):
                continue  # another herder took it over first
            try:
                placed = self._replace(record)
            except HerderError as exc:
                log.warning("allocation %s cannot be restored: %s", record.name, exc)
                self._fail_restore(record, f"the allocation cannot be restored: {exc}")
                continue
            tasks = {task.name: task for task in self.store.tasks(record.id)}
            restored.append(self._adopt(placed, record.job_id, tasks))
        # Now that what could not be restored is over: the networks of allocations that are over
        # (a herder killed before it removed them, or one failed above without its job).
        for alloc_id in self.networks.remove_stale():
            log.info("removed the network namespace that allocation %s, which is over, left", alloc_id)
        return restored

    def _recall(self, record: AllocRecord, node: Node) -> None:
        """Keep a finished allocation an earlier herder left as the read-only record of
        what happened: its tasks' last states and events, its logs where they were.
        Nothing of it runs, holds a port or is created: its directories are only named.
        One whose job no longer loads stays in the state database alone, for the
        garbage collector."""
        try:
            job, group = self._stored_job(record)
        except HerderError as exc:
            log.warning("finished allocation %s is not listed: %s", record.name, exc)
            return
        tasks = {task.name: task for task in self.store.tasks(record.id)}
        created = {name: task.created for name, task in tasks.items()}
        placed = self.placement.teardown(job, group, record.id, record.index, node, created)
        self._adopt(placed, record.job_id, tasks, finished=record.status)

    def _fail_restore(self, record: AllocRecord, message: str) -> None:
        """Fail an allocation that cannot be restored, telling each task why.

        Its tasks still running are reattached only to be killed and cleaned up
        through their drivers (contexts that hold no port and create no
        directory), so that none runs beside the allocation placed for the job
        anew. Without its job there is no driver to do it: the allocation is
        only marked failed.
        """
        tasks = {task.name: task for task in self.store.tasks(record.id)}
        try:
            job, group = self._stored_job(record)
        except HerderError as exc:
            log.warning("allocation %s: %s", record.name, exc)
            self.store.update_alloc(record.id, status="failed")
            for name in tasks:  # told where its tasks' events are read
                self.store.add_event(record.id, name, TaskEvent(type=events.SETUP_FAILURE, message=message))
            return
        created = {name: task.created for name, task in tasks.items()}
        placed = self.placement.teardown(job, group, record.id, record.index, self.node(), created)
        self._adopt(placed, record.job_id, tasks).fail_restore(message)

    def _stored_job(self, record: AllocRecord) -> tuple[Job, Group]:
        """The job and group of a stored allocation, loaded again from the job file as submitted."""
        stored = self.store.job(record.job_id)
        if stored is None:
            raise JobError([f"the job of allocation {record.name} is not in the state database"])
        job = load_job_text(stored.text, stored.format, stored.source, stored.variables)
        group = next((g for g in job.groups if g.name == record.group_name), None)
        if group is None:
            raise JobError([f"job {job.name} has no group {record.group_name}"])
        return job, group

    def _replace(self, record: AllocRecord) -> PlacedAlloc:
        """Placement again, from the stored job, ports and created resources."""
        job, group = self._stored_job(record)
        ports: dict[str, list[AllocatedPort]] = {}
        for port in self.store.ports(record.id):
            ports.setdefault(port.owner, []).append(
                AllocatedPort(label=port.label, value=port.value, to=port.to, host_ip=port.host_ip))
        created = {task.name: task.created for task in self.store.tasks(record.id)}
        return self.placement.restore(job, group, record.id, record.index, self.node(), ports, created)

    def _rebuild_task(self, deferred: Mapping[str, Any]) -> tuple[Task, TaskContext] | None:
        """A finished task and its context, for a cleanup step that was deferred (``deferred``: its payload)."""
        alloc_id, task_name = str(deferred["alloc_id"]), str(deferred["task"])
        record = self.store.alloc(alloc_id)
        if record is None:
            return None
        try:
            job, group = self._stored_job(record)
        except JobError as exc:
            log.warning("allocation %s: %s", record.name, exc)
            return None
        created = {task.name: task.created for task in self.store.tasks(alloc_id)}
        try:
            placed = self.placement.rebuild(job, group, alloc_id, record.index, self.node(), created)
        except UnsafePathError as exc:  # a task left a link where its directories were
            log.warning("allocation %s: %s", record.name, exc)
            return None
        found = next((t for t in placed.tasks if t.task.name == task_name), None)
        if found is None:
            return None
        return interpolate_task(found.task, found.make_lookup(dict(found.ctx.env))), found.ctx

    def _adopt(self, placed: PlacedAlloc, job: str, restored: dict[str, TaskRecord] | None = None, *,
               finished: AllocStatus | None = None) -> AllocRunner:
        runner = AllocRunner(placed, job, self.hooks, self.store, on_event=self._event,
                             on_done=self._alloc_done, defer_cleanup=self.deferred.add, restored=restored,
                             max_kill_timeout=self.config.client.max_kill_timeout, finished=finished,
                             networks=self.networks)
        with self._lock:
            self._allocs[placed.alloc.id] = runner
        return runner

    def run(self, allocs: Iterable[AllocRunner]) -> None:
        """Start running ``allocs`` (returns at once): on the workers every runner shares
        (see :mod:`herder.client.runtime`), not a thread per allocation or task."""
        pool = shared_runtime().pool
        for alloc in allocs:
            pool.submit(functools.partial(self._start, alloc))

    def _start(self, alloc: AllocRunner) -> None:
        # Before its first task starts (an allocation restored before it ran included), never after.
        if alloc.group.ephemeral_disk.carried and all(t.status.state == "pending" for t in alloc.tasks):
            self._take_data(alloc)
        alloc.start()

    def _take_data(self, alloc: AllocRunner) -> None:
        """Give a new allocation the ``alloc/data`` of the one it replaces, whose tasks are dead
        (a rescheduled one failed; an updated one was stopped before its replacement starts)."""
        record = self.store.previous(alloc.alloc.id)
        if record is None or self.store.alloc(record.previous) is None:
            return  # it replaces none, or the previous one was collected
        before = self.alloc(record.previous)
        if before is not None and not before.wait(0):
            # A canary placed beside it, or a scale up while it stops: its tasks still run. Moving
            # took their alloc/data from under them, and left them free to swap it for a link
            # between the check and the rename below.
            for runner in alloc.tasks:
                runner.emit(events.ALLOC_DATA_NOT_MOVED, f"alloc/data of allocation {record.previous} "
                            "not moved: its tasks still run", previous=record.previous)
            return
        try:
            move_alloc_data(self.data_dir, record.previous, alloc.alloc.id)
        except FileNotFoundError:
            return  # the previous allocation's directories are gone
        except (OSError, UnsafePathError) as exc:
            for runner in alloc.tasks:
                runner.emit(events.ALLOC_DATA_NOT_MOVED, f"alloc/data of allocation {record.previous} "
                            f"not moved: {exc}", previous=record.previous)
            return
        for runner in alloc.tasks:
            runner.emit(events.ALLOC_DATA_MOVED, f"alloc/data moved from allocation {record.previous}",
                        previous=record.previous)

    def forget(self, alloc_id: str) -> None:
        """Let go of a finished allocation whose directory and state are gone (the garbage collector's)."""
        with self._lock:
            self._allocs.pop(alloc_id, None)

    def _event(self, record: EventRecord) -> None:
        self._on_event(record)
        if record.event.type == events.STARTED:  # its deployment may count the time it runs from now on
            self.deployments.wake()

    def _alloc_done(self, alloc: AllocRunner) -> None:
        """Every task of ``alloc`` is dead and cleaned up: give back what it held."""
        self.placement.release(alloc.placed)
        with contextlib.suppress(StateError):  # kept for the next commit; the store reports the failure
            self.store.release_ports(alloc.alloc.id, wait=False)
        self.replacements.alloc_done(alloc)
        self.on_alloc_done(alloc)

    def _state_failed(self, exc: StateError) -> None:
        """The store's commits started failing (called by the store)."""
        log.error("cannot write the state: %s; %s", exc,
                  "the tasks run on, their state is written once it can be" if self.keep
                  else "stopping every task")
        for alloc in self.allocs:
            alloc.state_failed(str(exc), stop=not self.keep)

    def _state_recovered(self) -> None:
        """The store's commits succeed again (called by the store)."""
        log.warning("the state is written again to %s", self.store.path)

    def stop(self, alloc_id: str) -> None:
        """Stop an allocation gracefully (returns at once)."""
        alloc = self.alloc(alloc_id)
        if alloc is not None:
            alloc.stop()

    def restart_task(self, alloc_id: str, task: str, reason: str, *, failure: bool = False) -> None:
        """Restart a running task; ``failure`` counts it against the restart policy
        (a task restarted for failing its health checks), as in Nomad."""
        alloc = self.alloc(alloc_id)
        runner = next((r for r in alloc.tasks if r.name == task), None) if alloc else None
        if runner is not None:
            runner.restart(reason, failure=failure)

    def stop_all(self) -> None:
        """Stop every allocation gracefully (returns at once)."""
        for alloc in self.allocs:
            alloc.stop()

    def wait(self, allocs: Iterable[AllocRunner], timeout: float | None = None) -> bool:
        """Wait until every one of ``allocs`` is done; False if ``timeout`` ran out first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for alloc in allocs:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not alloc.wait(left):
                return False
        return True

    # -- lifetime --------------------------------------------------------------

    def start(self) -> None:
        """Begin the background work: periodic fingerprints, and the cleanup steps
        left to finish later (by this herder or an earlier one)."""
        self.fingerprints.start()
        self.deferred.start()
        for plugin in self.builtins:
            plugin.start()

    def close(self) -> None:
        """Let go of the data dir. Tasks still running keep running under the
        supervisor; with ``keep`` false the next herder reaps them. Deferred
        cleanups not yet due stay stored for the next herder.

        :raises StateError: state writes could not be committed (they are lost).
        """
        self.scheduler.close()
        self.fingerprints.stop()
        self.deferred.stop()
        self.replacements.stop()
        for plugin in reversed(self.builtins):
            plugin.close()
        self.hooks.remove_builtins(plugin.name for plugin in self.builtins)
        self.supervisor.close()
        try:
            self.store.close()
        finally:
            self._session_lock.release()

    def _alloc_record(self, alloc: PlacedAlloc, job: str, now: float) -> AllocRecord:
        a = alloc.alloc
        return AllocRecord(id=a.id, job_id=job, name=a.name, index=a.index, job_name=a.job_name,
                           group_name=a.group_name, dir=a.dir, session=self.session, keep=self.keep,
                           created_at=now, updated_at=now)


def _task_records(alloc: PlacedAlloc) -> list[TaskRecord]:
    """The new tasks' records, with what placement put in their ``created`` (the cores they reserve)."""
    return [TaskRecord(alloc_id=alloc.alloc.id, name=t.task.name, driver=t.task.driver, created=t.ctx.created.items())
            for t in alloc.tasks]


def _port_records(alloc: PlacedAlloc) -> list[PortRecord]:
    return [PortRecord(alloc_id=alloc.alloc.id, owner=owner, label=p.label, value=p.value, to=p.to, host_ip=p.host_ip)
            for owner, ports in alloc.ports.items() for p in ports]
