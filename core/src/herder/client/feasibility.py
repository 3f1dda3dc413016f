"""Whether this node can take a job's groups: Nomad's feasibility checks, on the one node there is.

Each group is put through :attr:`Feasibility.checkers` in the order of
Nomad's scheduler stack (the job's datacenters, its constraints, the drivers,
the group's and its tasks' constraints, its host volumes, ``distinct_hosts``,
``distinct_property``, then resources);
the first that refuses says why, as Nomad's metrics record one reason a node
was filtered. A checker is a callable ``(job, group, node) -> Refusal | None``:
a new check joins the list in :func:`default_checkers`, where it belongs in
that order.

A group the node refuses is not placed, nor is any other of the job
(herder's placement is all or nothing): :class:`Infeasible` names each
group and why, in the words of Nomad's plan.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from herder.client.config import HostVolumeConfig
from herder.client.constraints import DISTINCT_HOSTS, DISTINCT_PROPERTY, meets, resolve
from herder.client.node import Node
from herder.client.volumes import FILTER as VOLUMES_FILTER
from herder.client.volumes import group_volume_problems
from herder.errors import PlacementError
from herder.model import Constraint, Group, Job
from herder.objects import Fingerprint

CONSTRAINT, DIMENSION, DATACENTER = "constraint", "dimension", "datacenter"
MB = 1 << 20


@dataclass(frozen=True)
class Refusal:
    """Why the node does not take (all of) a group: a ``reason`` of ``kind`` :data:`CONSTRAINT` (Nomad's
    ``ConstraintFiltered``), :data:`DIMENSION` (a resource exhausted: ``DimensionExhausted``) or
    :data:`DATACENTER` (the node is in none of the job's datacenters: it is not even evaluated).
    ``placeable`` allocations of the group would fit (``distinct_hosts`` lets one through)."""

    reason: str
    kind: str = CONSTRAINT
    placeable: int = 0
    detail: str = ""
    """herder's own account, beside Nomad's words (which host volume is missing, say)."""


Checker = Callable[[Job, Group, Node], "Refusal | None"]


@dataclass(frozen=True)
class Unplaced:
    """A group the node refuses, and how many of its allocations fail."""

    group: str
    failed: int
    refusal: Refusal
    datacenters: tuple[str, ...] = ()

    def reasons(self) -> list[str]:
        """Nomad's words for the refusal."""
        kind, reason = self.refusal.kind, self.refusal.reason
        if kind == DATACENTER:
            return ["No nodes were eligible for evaluation",
                    *(f"No nodes are available in datacenter {dc!r}".replace("'", '"') for dc in self.datacenters)]
        if kind == DIMENSION:
            return [f'Dimension "{reason}" exhausted on 1 node']
        return [f'Constraint "{reason}" filtered 1 node']

    def describe(self) -> str:
        plural = "" if self.failed == 1 else "s"
        detail = f" ({self.refusal.detail})" if self.refusal.detail else ""
        return f'Task Group "{self.group}" (failed to place {self.failed} allocation{plural}): ' \
               + "; ".join(self.reasons()) + detail


class Infeasible(PlacementError):
    """The node does not take the job: ``unplaced`` says which groups and why."""

    def __init__(self, job: str, unplaced: Sequence[Unplaced]) -> None:
        self.job = job
        self.unplaced = list(unplaced)
        super().__init__("; ".join(u.describe() for u in unplaced))


# -- the checkers -----------------------------------------------------------------


def glob_matches(pattern: str, text: str) -> bool:
    """ryanuber/go-glob's ``Glob``, as Nomad matches ``datacenters``: ``*`` matches any run of
    characters, nothing else is special."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return pattern == text
    if not text.startswith(parts[0]) or not text.endswith(parts[-1]) or len(text) < len(parts[0]) + len(parts[-1]):
        return False
    position = len(parts[0])
    end = len(text) - len(parts[-1])
    for part in parts[1:-1]:
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


def _earlier(job: Job, group: Group) -> list[Group]:
    """The groups of ``job`` before ``group``: Nomad places a job's groups in order, so what a whole
    job may have (one node's disk, one allocation of a ``distinct_hosts`` job) goes to them first."""
    for index, candidate in enumerate(job.groups):
        if candidate is group:
            return job.groups[:index]
    return []


def datacenters(job: Job, group: Group, node: Node) -> Refusal | None:
    """The node's datacenter is one of the job's (each may be a glob, as Nomad 1.5's ``*``)."""
    if any(glob_matches(pattern, node.datacenter) for pattern in job.datacenters):
        return None
    return Refusal(node.datacenter, DATACENTER)


def _first_unmet(constraints: Sequence[Constraint], node: Node) -> Refusal | None:
    for constraint in constraints:
        if not meets(constraint, node):
            return Refusal(str(constraint))
    return None


def job_constraints(job: Job, group: Group, node: Node) -> Refusal | None:
    return _first_unmet(job.constraints, node)


def group_constraints(job: Job, group: Group, node: Node) -> Refusal | None:
    """The group's constraints, then its tasks' (Nomad checks a task's with its group's)."""
    return _first_unmet([*group.constraints, *(c for task in group.tasks for c in task.constraints)], node)


_GO_FALSE = frozenset({"0", "f", "F", "false", "FALSE", "False"})
"""What Go's ``strconv.ParseBool`` reads as false."""


def _distinct_hosts(constraints: Sequence[Constraint]) -> bool:
    """As Nomad's ``hasDistinctHostsConstraint``: the first ``distinct_hosts`` decides; its value is
    true when empty or not a boolean Go reads."""
    for constraint in constraints:
        if constraint.operator == DISTINCT_HOSTS:
            return constraint.value not in _GO_FALSE
    return False


def distinct_hosts(job: Job, group: Group, node: Node) -> Refusal | None:
    """One allocation of the job (a job's ``distinct_hosts``) or of the group (a group's) per node: on
    one node, a group of more than one, or a job of more than one allocation, cannot all be placed."""
    if _distinct_hosts(job.constraints):
        room = max(0, 1 - sum(g.count for g in _earlier(job, group)))
    elif _distinct_hosts(group.constraints):
        room = 1
    else:
        return None
    return Refusal(DISTINCT_HOSTS, placeable=room) if group.count > room else None


def distinct_property(job: Job, group: Group, node: Node) -> Refusal | None:
    """At most ``value`` (default 1) allocations per value of the property: on one node every
    allocation shares the node's value. A node without the property is filtered, as in Nomad."""
    scoped = [(c, True) for c in job.constraints if c.operator == DISTINCT_PROPERTY]
    scoped += [(c, False) for c in group.constraints if c.operator == DISTINCT_PROPERTY]
    for constraint, whole_job in scoped:
        value, found = resolve(constraint.attribute, node)
        if not found:
            return Refusal(f'missing property "{constraint.attribute}"')
        limit = _limit(constraint.value)
        if limit is None:
            return Refusal(f'failed to convert RTarget "{constraint.value}" to uint64')
        before = sum(g.count for g in _earlier(job, group)) if whole_job else 0
        room = max(0, limit - before)
        if group.count > room:
            used = before + room
            return Refusal(f"distinct_property: {constraint.attribute}={value} used by {used} allocs", placeable=room)
    return None


def _limit(text: str) -> int | None:
    if not text:
        return 1
    return int(text) if text.isascii() and text.isdigit() and int(text) < 2**64 else None


def group_disk(group: Group) -> int:
    """The MB an allocation of ``group`` asks of the data dir (its ``ephemeral_disk.size``)."""
    return group.ephemeral_disk.size


@dataclass
class DiskChecker:
    """The allocations' disk (``ephemeral_disk.size``, or their tasks' ``resources.disk``) against the
    free space of the data dir, where they write: the job's groups up to this one must fit in it."""

    data_dir: Path

    def __call__(self, job: Job, group: Group, node: Node) -> Refusal | None:
        directory = self.data_dir
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent  # not made yet (herder validate --node): where it will be
        stats = os.statvfs(directory)
        free = stats.f_bavail * stats.f_frsize // MB
        earlier = _earlier(job, group)
        wanted = sum(g.count * group_disk(g) for g in [*earlier, group])
        if wanted <= free:
            return None
        room = max(0, free - sum(g.count * group_disk(g) for g in earlier))
        return Refusal("disk", DIMENSION, placeable=room // group_disk(group) if group_disk(group) else group.count)


@dataclass
class DriverChecker:
    """Every driver of the group detected and healthy (by its latest fingerprint)."""

    fingerprint: Callable[[str], Fingerprint]

    def __call__(self, job: Job, group: Group, node: Node) -> Refusal | None:
        for driver in sorted({task.driver for task in group.tasks}):
            found = self.fingerprint(driver)
            if not (found.detected and found.healthy):
                return Refusal("missing drivers")
        return None


@dataclass
class HostVolumeChecker:
    """The group's host volumes declared on this node, writable where the group writes (Nomad's
    ``HostVolumeChecker``)."""

    volumes: Mapping[str, HostVolumeConfig]

    def __call__(self, job: Job, group: Group, node: Node) -> Refusal | None:
        problems = group_volume_problems(group, self.volumes)
        return Refusal(VOLUMES_FILTER, detail="; ".join(problems)) if problems else None


def default_checkers(data_dir: Path, fingerprint: Callable[[str], Fingerprint],
                     host_volumes: Mapping[str, HostVolumeConfig]) -> list[Checker]:
    """The checks of placement, in the order of Nomad's scheduler stack."""
    return [datacenters, job_constraints, DriverChecker(fingerprint), group_constraints,
            HostVolumeChecker(host_volumes), distinct_hosts, distinct_property, DiskChecker(data_dir)]


@dataclass
class Feasibility:
    """The node's checks of a job's groups, in order."""

    checkers: list[Checker] = field(default_factory=list)

    def group(self, job: Job, group: Group, node: Node) -> Unplaced | None:
        """Why ``node`` does not take all of ``group``, or None."""
        if group.count == 0:
            return None
        for checker in self.checkers:
            refusal = checker(job, group, node)
            if refusal is not None:
                return Unplaced(group.name, group.count - min(refusal.placeable, group.count), refusal,
                                tuple(job.datacenters))
        return None

    def unplaced(self, job: Job, node: Node, groups: Sequence[Group] | None = None) -> list[Unplaced]:
        """The groups of ``job`` (or only ``groups`` of it) the node does not take."""
        found = (self.group(job, group, node) for group in (job.groups if groups is None else groups))
        return [unplaced for unplaced in found if unplaced is not None]

    def require(self, job: Job, node: Node) -> None:
        """:raises Infeasible: a group of ``job`` does not fit ``node``."""
        unplaced = self.unplaced(job, node)
        if unplaced:
            raise Infeasible(job.name, unplaced)
