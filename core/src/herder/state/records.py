"""The rows of the state database, as frozen dataclasses.

Records are built with keyword arguments. Timestamps are wall-clock epoch
seconds (``time.time()``): they must mean the same thing to the next herder
process, which a monotonic clock would not.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

AllocStatus = Literal["pending", "running", "complete", "failed", "stopped"]
DesiredStatus = Literal["run", "stop"]
ParentStatus = Literal["running", "stopped"]
DeploymentStatus = Literal["running", "paused", "successful", "failed", "cancelled"]
TaskState = Literal["pending", "running", "dead"]

LIVE_STATUSES: tuple[AllocStatus, ...] = ("pending", "running")
"""The statuses of an allocation whose tasks may still be running."""


def check_choice(name: str, value: object, choices: object) -> None:
    """Raise ValueError unless ``value`` is one of the values of the ``Literal`` ``choices``."""
    allowed = get_args(choices)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")


def job_id(fmt: str, text: str, variables: dict[str, str]) -> str:
    """The id of a job submission: a hash of what rebuilds the job.

    The same file submitted with the same variables gets the same id, whatever
    order the variables came in.
    """
    canonical = json.dumps([fmt, text, sorted(variables.items())], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, kw_only=True)
class JobRecord:
    """A job file as submitted, so that a later herder can load it again.

    ``source`` says where it came from (a path, ``"api"``...); ``format`` is
    the job file format (``hcl``, ``json``, ``yaml``).
    """

    id: str
    name: str
    source: str
    format: str
    text: str
    variables: dict[str, str] = field(default_factory=dict)
    created_at: float


@dataclass(frozen=True, kw_only=True)
class VersionRecord:
    """Version ``version`` of job ``job`` (from 0): submission ``job_id`` with the group
    counts ``counts`` set over its file's (by a scale), submitted at ``submitted_at``.
    ``stable`` once a deployment of it succeeded."""

    job: str
    version: int
    job_id: str
    counts: dict[str, int] = field(default_factory=dict)
    submitted_at: float
    stable: bool = False


@dataclass(frozen=True, kw_only=True)
class DeploymentRecord:
    """A deployment of version ``version`` of job ``job``: ``state`` is what the client's
    deployment engine keeps of it (JSON: each group's progress and each allocation's health),
    written with every allocation it places so that a restarted agent continues it."""

    id: str
    job: str
    version: int
    status: DeploymentStatus = "running"
    description: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    created_at: float
    modified_at: float

    def __post_init__(self) -> None:
        check_choice("status", self.status, DeploymentStatus)


@dataclass(frozen=True, kw_only=True)
class ParentRecord:
    """A job registered rather than run (a periodic or parameterized one), by name: ``text`` is its
    canonical document (JSON). ``status`` is ``stopped`` once it is stopped: it
    launches no more. ``last_launch`` (epoch seconds) is the scheduled time of its
    latest child, written before that child is submitted, so that a restarted
    agent never launches a time twice."""

    name: str
    source: str
    text: str
    status: ParentStatus = "running"
    last_launch: float | None = None
    registered_at: float

    def __post_init__(self) -> None:
        check_choice("status", self.status, ParentStatus)


@dataclass(frozen=True, kw_only=True)
class AllocRecord:
    """An allocation: ``session`` is the id of the herder process that owns
    it, ``keep`` whether its tasks should outlive that process."""

    id: str
    job_id: str
    name: str
    index: int
    job_name: str
    group_name: str
    dir: Path
    session: str
    keep: bool = False
    status: AllocStatus = "pending"
    desired: DesiredStatus = "run"
    created_at: float
    updated_at: float

    def __post_init__(self) -> None:
        check_choice("status", self.status, AllocStatus)
        check_choice("desired", self.desired, DesiredStatus)


@dataclass(frozen=True, kw_only=True)
class TaskRecord:
    """The state of one task of an allocation.

    ``restarts`` counts every restart; ``restart_count`` and
    ``restart_window_start`` are the restart policy's counter and the start of
    its interval, so a restarted herder keeps counting where the last one
    stopped. ``handle_state`` is the driver handle's ``state()``, ``created``
    the task's ``ctx.created`` items.
    """

    alloc_id: str
    name: str
    driver: str
    state: TaskState = "pending"
    failed: bool = False
    restarts: int = 0
    exit_code: int | None = None
    handle_state: dict[str, Any] | None = None
    created: list[tuple[str, str]] = field(default_factory=list)
    restart_count: int = 0
    restart_window_start: float | None = None
    started_at: float | None = None
    finished_at: float | None = None

    def __post_init__(self) -> None:
        check_choice("state", self.state, TaskState)


@dataclass(frozen=True, kw_only=True)
class PortRecord:
    """A port held by an allocation; ``owner`` is a task name, or ``""`` for
    the group's shared ports."""

    alloc_id: str
    owner: str
    label: str
    value: int
    to: int | None = None
    host_ip: str = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class NetworkRecord:
    """An allocation's network namespace and its attachment by CNI, from before it is made until it
    is removed: what a herder started after a crash needs to remove it.

    ``driver`` is the driver that made the namespace (``labels`` its facts), "" when herder
    made it; ``conflist`` is the CNI configuration list it was attached with, ``port_mappings``
    the portmap plugin's mappings, and ``result`` the CNI result: None until every plugin's ADD
    succeeded."""

    alloc_id: str
    mode: str
    path: str
    driver: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    conflist: str = ""
    port_mappings: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    created_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class PreviousRecord:
    """The allocation ``previous`` that allocation ``alloc_id`` replaces (a reschedule of a failed
    one, or an update's), and the reschedules that led to it, oldest first: each a
    ``{"time", "previous", "delay"}`` (epoch seconds, an allocation ID, seconds)."""

    alloc_id: str
    previous: str
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Deferred:
    """Work to do at ``due`` (epoch seconds) even if this process dies first,
    such as removing an image after a delay. ``kind`` and ``key`` identify it."""

    kind: str
    key: str
    payload: dict[str, Any] = field(default_factory=dict)
    due: float
