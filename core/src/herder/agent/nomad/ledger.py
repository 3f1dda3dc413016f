"""What Nomad's servers keep and herder has no need of: evaluations and raft indexes;
and the client's deployments in Nomad's terms.

herder places a job the moment it is submitted, so every evaluation here is
complete when it is made; it only tells the command line's monitor which
allocations the submission made, and which deployment follows them. The
deployments are the client's (:mod:`herder.client.deployments`): here their
changes become indexes.
The index every answer carries (``X-Nomad-Index``) is the agent's event count
plus the changes made here, so it grows whenever anything a watcher reads may
have changed.

Kept in memory: an agent started again knows the allocations (they are in its
state) but not the evaluations of before.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field

from herder.agent.events import EventLog
from herder.app import Agent, NotFound
from herder.client.alloc_runner import AllocRunner
from herder.client.deployments import Deployment
from herder.client.feasibility import Unplaced

SECOND = 1_000_000_000
"""Nanoseconds, Nomad's unit of duration."""


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
    wait_until: float | None = None
    """A follow-up evaluation's time (epoch seconds): when a failed allocation is replaced."""
    failed: list[Unplaced] = field(default_factory=list)
    """The groups the node did not take (Nomad's ``FailedTGAllocs``): then nothing was placed."""


class Ledger:
    """The evaluations and indexes of the Nomad API, over ``agent``. Thread-safe."""

    def __init__(self, agent: Agent, events: EventLog) -> None:
        self.agent = agent
        self._deployments = agent.deployments
        self.events = events
        self._lock = threading.Lock()
        self._changes = 0
        self._evaluations: dict[str, Evaluation] = {}
        self._alloc_evals: dict[str, str] = {}
        self._followups: dict[str, Evaluation] = {}  # failed allocation ID -> its follow-up evaluation
        self._created: dict[str, int] = {}
        self._alloc_indexes: dict[str, int] = {}
        self._deployment_indexes: dict[str, tuple[int, int, int]] = {}
        """Each deployment's create index, and its modify index with the revision it was made at."""
        self._job_indexes: dict[str, tuple[tuple[str, bool], int]] = {}
        """Each job's latest state seen here (its submission, and whether it is stopped), and the index at
        which it was seen first."""

    # -- indexes --------------------------------------------------------------

    def index(self) -> int:
        """The current index: it grows with every task event and every change made here (never 0)."""
        with self._lock:
            return 1 + self.events.last + self._changes

    def change(self) -> int:
        """Count a change made elsewhere that a watcher reads (the node's drain, its eligibility); the index
        it makes."""
        with self._lock:
            return self._bump()

    def _bump(self) -> int:
        """Count a change (the lock held); the index it makes."""
        self._changes += 1
        return 1 + self.events.last + self._changes

    # -- evaluations ------------------------------------------------------------

    def evaluate(self, job: str, job_type: str, triggered_by: str, allocs: list[AllocRunner],
                 failed: list[Unplaced] | None = None) -> Evaluation:
        """Record the (complete) evaluation of a change to ``job`` that made or stopped ``allocs``, or
        that placed nothing since the node does not take the ``failed`` groups; a registration names
        the deployment the client started for it, if one is active."""
        with self._lock:
            index = self._bump()
            evaluation = Evaluation(id=str(uuid.uuid4()), job=job, job_type=job_type, triggered_by=triggered_by,
                                    allocs=[a.alloc.id for a in allocs], create_index=index,
                                    created=time.time_ns(), failed=list(failed or []))
            fresh = [a for a in allocs if a.alloc.id not in self._alloc_evals]
            state = (allocs[0].job_id, triggered_by == "job-deregister") if allocs else None
            if state and triggered_by in ("job-register", "job-deregister") and \
                    self._job_indexes.get(job, (None, 0))[0] != state:  # a job submitted again unchanged keeps it
                self._job_indexes[job] = (state, index)
            for alloc in fresh:
                self._alloc_evals[alloc.alloc.id] = evaluation.id
                self._alloc_indexes[alloc.alloc.id] = index
        if triggered_by == "job-register":
            active = [d for d in self._deployments.of_job(job) if d.active]
            evaluation.deployment = active[0].id if active else ""
        with self._lock:
            self._evaluations[evaluation.id] = evaluation
        return evaluation

    def followup(self, alloc: AllocRunner, due: float) -> Evaluation:
        """The evaluation that replaces failed allocation ``alloc`` at ``due`` (Nomad's follow-up
        evaluation, which its ``alloc status`` reads the next reschedule time from)."""
        with self._lock:
            found = self._followups.get(alloc.alloc.id)
            if found is None or found.wait_until != due:
                index = self._bump()
                found = Evaluation(id=found.id if found else str(uuid.uuid4()), job=alloc.job.name,
                                   job_type=alloc.job.type, triggered_by="alloc-failure", allocs=[],
                                   create_index=index, created=time.time_ns(), wait_until=due)
                self._followups[alloc.alloc.id] = found
                self._evaluations[found.id] = found
            return found

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
        found = self._deployments.of(alloc_id)
        return self._indexed(found) if found else None

    def deployment(self, deployment_id: str) -> Deployment:
        """The deployment, its health brought up to date; :class:`NotFound` if there is none."""
        found = self._deployments.get(deployment_id)
        if found is None:
            raise NotFound("deployment not found")
        return self._indexed(found)

    def deployments(self, job: str | None = None) -> list[Deployment]:
        """Newest first, as Nomad lists them."""
        return [self._indexed(d) for d in self._deployments.of_job(job)]

    def deployment_indexes(self, deployment: Deployment) -> tuple[int, int]:
        """The index at which ``deployment`` was made, and the one of its latest change seen here."""
        with self._lock:
            create, modify, _ = self._deployment_indexes.get(deployment.id, (1, 1, 0))
            return create, modify

    def _indexed(self, deployment: Deployment) -> Deployment:
        """``deployment``, a change of it since it was last read here counted (a new index)."""
        with self._lock:
            create, _, revision = self._deployment_indexes.get(deployment.id, (1, 1, 0))
            if revision != deployment.revision:
                self._deployment_indexes[deployment.id] = (create, self._bump(), deployment.revision)
        return deployment

    # -- jobs -------------------------------------------------------------------

    def job_modify_index(self, job: str, version: str, stopped: bool) -> int:
        """The index at which submission ``version`` of ``job`` was registered (or stopped): Nomad's
        ``JobModifyIndex``, which ``nomad job run -check-index`` compares. A submission made before this
        agent, or through herder's own API, gets the index at which it is first asked about."""
        with self._lock:
            known = self._job_indexes.get(job)
            if known is None or known[0] != (version, stopped):
                known = self._job_indexes[job] = ((version, stopped), 1 + self.events.last + self._changes)
            return known[1]
    def created(self, alloc: AllocRunner) -> int:
        """When ``alloc`` was placed, in Unix nanoseconds."""
        alloc_id = alloc.alloc.id
        with self._lock:
            known = self._created.get(alloc_id)
        if known is None:
            created_at = self.agent.created_at(alloc_id)
            known = int((created_at if created_at is not None else time.time()) * SECOND)
            with self._lock:
                self._created[alloc_id] = known
        return known
