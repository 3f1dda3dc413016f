"""The agent: its long-lived client and the use cases put together (:class:`Agent`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from herder import __version__
from herder.app.allocations import Allocations, task
from herder.app.errors import Conflict
from herder.app.jobs import Jobs
from herder.app.periodic import Parent, Registry
from herder.app.reading import load_submitted
from herder.app.rollouts import Rollouts
from herder.app.service import SelfService
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.client import Client, JobSource
from herder.client.config import Config
from herder.client.deployments import Deployments
from herder.client.gc import Collected, GarbageCollector
from herder.client.health import HealthChange
from herder.client.node import Node
from herder.client.replacements import Rescheduling
from herder.client.task_runner import TaskRunner
from herder.client.versions import Version
from herder.objects import ExecSession, TaskStats
from herder.plugins.hooks import Hooks
from herder.services.native import NativeServices
from herder.state import StateError

log = logging.getLogger("herder.agent")


class Agent:
    """The client of ``herder agent``: its tasks outlive it (``keep``), and the
    next agent on the same data dir reattaches to them.

    Everything here is synchronous and thread-safe; the HTTP API translates
    requests to these calls, and :class:`NotFound` and :class:`Conflict` to
    its answers. ``on_event`` sees every task event, ``on_health`` every change
    of a service check's status, ``on_collected`` the IDs of the finished
    allocations each garbage collection removed. Each family of use cases is
    a room of its own (:mod:`.jobs`, :mod:`.periodic`, :mod:`.allocations`,
    :mod:`.service`); this puts them together.
    """

    def __init__(self, config: Config, hooks: Hooks, *, on_event: Callable[[EventRecord], None],
                 on_health: Callable[[HealthChange], None] = lambda change: None,
                 on_collected: Callable[[list[str]], None] = lambda ids: None) -> None:
        self.config = config
        self.hooks = hooks
        self.version = __version__
        self._draining = threading.Event()  # set while the agent takes no new job: drained, or not eligible
        self._drain_started: float | None = None
        self._ineligible = False
        self.client = Client(config, hooks, keep=True, on_event=on_event, on_health=on_health)
        self.gc = GarbageCollector(self.client, on_collected=on_collected)
        lock = threading.Lock()  # orders submissions, ordinary and registered
        self.registry = Registry(self.client, hooks, self.gc, lock, self._draining)
        self.submissions = Jobs(self.client, hooks, self.gc, self.registry, lock, self._draining)
        self.rollouts = Rollouts(self.client, lock, self._draining)
        # Nor is a failed allocation replaced while the agent is not eligible (it was, at once).
        self.client.replacements.paused = self._draining.is_set
        self.client.scheduler.deployments.paused = self._draining.is_set  # nor a deployment's next step
        self.allocations = Allocations(self.client, config.telemetry.collection_interval)
        self.usage = self.allocations.usage
        self.service = SelfService(self.client, self.version)

    @property
    def draining(self) -> bool:
        """Whether a drain was asked (and not ended): the agent's tasks were stopped, and it takes no new job."""
        return self._drain_started is not None

    @property
    def drain_started(self) -> float | None:
        """When the drain under way began (Unix seconds); None without one."""
        return self._drain_started

    @property
    def eligible(self) -> bool:
        """Whether the agent takes new jobs and launches children (Nomad's scheduling eligibility)."""
        return not self._draining.is_set()

    @property
    def deployments(self) -> Deployments:
        return self.client.deployments

    # -- lifetime ------------------------------------------------------------

    def start(self, address: tuple[str, int] | None = None) -> list[AllocRunner]:
        """Start the background work, reattach what the previous agent left running and list
        what it finished (until collected); ``address`` (where the API listens) registers the
        agent as a service."""
        self.client.start()
        restored = self.client.restore(keep=True, history=True)
        for alloc in restored:
            log.info("reattaching allocation %s (%s)", alloc.alloc.name, alloc.alloc.id)
        self.client.run(restored)
        self.client.scheduler.start()  # the deployments an earlier agent left go on, over what it restored
        self.client.replacements.start()
        self.gc.start()
        self.usage.start()
        self.registry.start()
        if address is not None:
            self.service.register(*address)
        return restored

    def begin_drain(self) -> list[AllocRunner]:
        """Start stopping every task gracefully (returns at once); no new job is taken, no child launched,
        no failed allocation replaced."""
        if self._drain_started is None:
            self._drain_started = time.time()
        self._draining.set()
        self.client.replacements.cancel_all()
        allocs = self.client.allocs
        for alloc in allocs:
            alloc.stop()
        return allocs

    def end_drain(self, *, eligible: bool = True) -> None:
        """End a drain (``nomad node drain -disable``): what it stopped stays stopped; with ``eligible``
        the agent takes new jobs again, as Nomad's node marked eligible."""
        self._drain_started = None
        if eligible:
            self._ineligible = False
        self._take_jobs()

    def set_eligible(self, eligible: bool) -> None:
        """Take new jobs or not (``nomad node eligibility``); the allocations running are left alone.

        A drain whose allocations have all stopped is complete, as Nomad's: made eligible, it ends.

        :raises Conflict: made eligible while a drain still stops allocations (as Nomad: end the drain instead)."""
        if eligible and self.draining:
            if self.drain_pending():
                raise Conflict("can not toggle eligibility on a node that is being drained: disable the drain")
            self._drain_started = None
        self._ineligible = not eligible
        self._take_jobs()

    def drain_pending(self) -> bool:
        """Whether a drain is on and an allocation it stops has not stopped yet."""
        return self.draining and any(alloc.status in ("pending", "running") for alloc in self.client.allocs)

    def _take_jobs(self) -> None:
        if self.draining or self._ineligible:
            self._draining.set()
        else:
            self._draining.clear()

    def drain(self, timeout: float | None = None) -> bool:
        """Stop every task gracefully; True once all are dead (False on timeout)."""
        return self.client.wait(self.begin_drain(), timeout)

    def close(self) -> None:
        """Let go: running tasks keep running under the supervisor for the next agent."""
        self.registry.stop()
        self.gc.stop()
        self.usage.stop()
        self.service.remove()
        self.client.close()

    def heartbeat(self) -> None:
        """Pass the agent's own check: called every :data:`~herder.app.service.SELF_CHECK_INTERVAL`
        by the loop that serves the API, so an agent that died or stopped answering turns
        critical when the TTL runs out."""
        self.service.heartbeat()

    # -- jobs ----------------------------------------------------------------

    def submit(self, text: str, fmt: str, variables: dict[str, str], source: str,
               lines: Mapping[str, int] | None = None) -> tuple[str, list[AllocRunner], list[str]]:
        """See :meth:`herder.app.jobs.Jobs.submit`."""
        return self.submissions.submit(text, fmt, variables, source, lines)

    def validate(self, text: str, fmt: str, source: str) -> list[str]:
        """Check a job as :meth:`submit` does, each task's config against its driver's schema,
        and run nothing; the job's warnings.

        :raises JobError: the job is invalid, each problem with its path.
        """
        return load_submitted(JobSource(text=text, format=fmt, source=source), self.hooks).warnings

    def dispatch(self, name: str, meta: Mapping[str, str], payload: bytes) -> tuple[str, list[AllocRunner]]:
        """See :meth:`herder.app.jobs.Jobs.dispatch`."""
        return self.submissions.dispatch(name, meta, payload)

    def jobs(self) -> dict[str, list[AllocRunner]]:
        return self.submissions.jobs()

    def job(self, name: str) -> list[AllocRunner]:
        return self.submissions.job(name)

    def stop_job(self, name: str) -> list[AllocRunner]:
        return self.submissions.stop(name)

    def purge_job(self, name: str) -> list[AllocRunner]:
        """See :meth:`herder.app.jobs.Jobs.purge`."""
        return self.submissions.purge(name)

    def job_versions(self, name: str) -> list[Version]:
        """The versions of job ``name``, oldest first."""
        return self.client.versions.of(name)

    def job_version(self, name: str, job_id: str) -> Version:
        """The latest version of job ``name`` that is submission ``job_id``."""
        return self.client.versions.get(name, job_id)

    def collect_garbage(self) -> Collected:
        """Collect finished allocations and jobs now, as the periodic collection does (``herder system gc``).

        :raises Conflict: the state database cannot be written now (a full disk): nothing is lost, the
            next collection tries again.
        """
        try:
            return self.gc.collect()
        except StateError as exc:
            raise Conflict(f"cannot collect now: {exc}") from None

    # -- registered jobs: periodic and parameterized ----------------------------

    def parents(self) -> dict[str, Parent]:
        return self.registry.parents()

    def parent(self, name: str) -> Parent | None:
        return self.registry.parent(name)

    def children(self, name: str) -> dict[str, list[AllocRunner]]:
        return self.registry.children(name)

    def force(self, name: str) -> tuple[str, list[AllocRunner]]:
        """See :meth:`herder.app.periodic.Registry.force`."""
        return self.registry.force(name)

    # -- allocations -------------------------------------------------------

    def node(self) -> Node:
        """This host as job files see it."""
        return self.client.node()

    def jwks(self) -> dict[str, list[dict[str, str]]]:
        """The public keys that verify the tasks' workload identity tokens (a JSON Web Key Set).

        :raises SigningKeyError: the key cannot be made or read."""
        return self.client.signer.jwks()

    def allocs(self) -> list[AllocRunner]:
        """Every allocation the agent knows, running or finished and not collected yet."""
        return self.client.allocs

    def alloc_by_id(self, alloc_id: str) -> AllocRunner | None:
        """The allocation whose ID is ``alloc_id`` exactly, if the agent still knows it."""
        return self.client.alloc(alloc_id)

    def alloc(self, prefix: str) -> AllocRunner:
        """See :meth:`herder.app.allocations.Allocations.alloc`."""
        return self.allocations.alloc(prefix)

    def created_at(self, alloc_id: str) -> float | None:
        return self.client.created_at(alloc_id)

    def rescheduling(self, alloc: AllocRunner) -> Rescheduling:
        """What ``alloc`` replaces, what replaced it, its reschedule attempts and its next time."""
        return self.client.replacements.of(alloc)

    def health(self, alloc_id: str) -> dict[str, list[dict[str, str]]]:
        """The service checks of an allocation, by task."""
        return self.client.checks(alloc_id)

    def native_services(self) -> NativeServices | None:
        """The native services (``provider = "nomad"``, and those of the embedded backend); None
        without a services plugin."""
        services = self.client.services()
        return services.discovery if services is not None else None

    @staticmethod
    def task(alloc: AllocRunner, name: str) -> TaskRunner:
        return task(alloc, name)

    def signal(self, alloc: AllocRunner, task: str | None, name: str) -> list[str]:
        return self.allocations.signal(alloc, task, name)

    def restart(self, alloc: AllocRunner, task: str | None, reason: str) -> list[str]:
        return self.allocations.restart(alloc, task, reason)

    def stop_alloc(self, alloc: AllocRunner) -> list[AllocRunner]:
        """See :meth:`herder.app.allocations.Allocations.stop`: a draining or ineligible agent places no
        replacement (a replacement is a new allocation, which an ineligible node, as Nomad's, takes none of;
        only a drain was checked, so an allocation stopped on an ineligible agent came back at once)."""
        return self.allocations.stop(alloc, replace=self.eligible)

    def stats(self, alloc: AllocRunner) -> dict[str, TaskStats | None]:
        return self.allocations.stats(alloc)

    def exec(self, alloc: AllocRunner, task: str, command: list[str], timeout: float) -> tuple[int, bytes]:
        return self.allocations.exec(alloc, task, command, timeout)

    def exec_session(self, alloc: AllocRunner, task: str, command: list[str], tty: bool) -> ExecSession:
        return self.allocations.exec_session(alloc, task, command, tty)
