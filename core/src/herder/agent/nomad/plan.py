"""``nomad job plan``: what registering a job would do, without doing it (Nomad's ``JobPlanResponse``).

The difference of the job to its current version (:mod:`.diff`), what each
group's allocations would undergo, as Nomad's scheduler decides it
(:func:`herder.jobspec.update_kind.group_update`), the allocations that could
not be placed, and the ``JobModifyIndex`` that ``nomad job run -check-index``
then enforces (:func:`enforce_index`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from herder import app
from herder.agent.nomad import models
from herder.agent.nomad.diff import ADDED, DELETED, EDITED, NONE, job_diff
from herder.agent.nomad.ledger import SECOND
from herder.agent.nomad.shapes import NomadError, Shapes, allocation_metric
from herder.app import NotFound
from herder.client.client import JobSource
from herder.jobspec import evaluate_job_text
from herder.jobspec.dispatch import next_launch_time
from herder.jobspec.nomad_json import to_nomad
from herder.jobspec.update_kind import UpdateKind, group_updates
from herder.model import Group, Job, Periodic
from herder.state import JobRecord

ENFORCE_PREFIX = "Enforcing job modify index"
"""How Nomad's refusal of a stale ``-check-index`` begins (the command line looks for it)."""

# Nomad's names of the updates a group's allocations undergo (scheduler/annotate.go), by DesiredUpdates field.
_UPDATE_NAMES = {"Ignore": "ignore", "Place": "create", "Stop": "destroy", "InPlaceUpdate": "in-place update",
                 "DestructiveUpdate": "create/destroy update"}
_RESTART_DEFAULTS = {
    "service": {"Attempts": 2, "Delay": 15 * SECOND, "Interval": 1800 * SECOND, "Mode": "fail"},
    "batch": {"Attempts": 3, "Delay": 15 * SECOND, "Interval": 86400 * SECOND, "Mode": "fail"},
}
"""Nomad's restart policies of a group that has none (api/tasks.go), by job type."""
_TASK_ANNOTATIONS = {UpdateKind.IN_PLACE: "forces in-place update",
                     UpdateKind.DESTRUCTIVE: "forces create/destroy update"}


def enforce_index(current: int | None, given: int) -> None:
    """Refuse a registration whose ``JobModifyIndex`` is not the job's ``current`` one (None: no such
    job), with Nomad's messages."""
    if current is not None and given == 0:
        raise NomadError(409, f"{ENFORCE_PREFIX} 0: job already exists")
    if current is not None and given != current:
        raise NomadError(409, f"{ENFORCE_PREFIX} {given}: job exists with conflicting job modify index: {current}")
    if current is None and given != 0:
        raise NomadError(409, f"{ENFORCE_PREFIX} {given}: job does not exist")


def plan(agent: app.Agent, shapes: Shapes, name: str, job: dict[str, Any]) -> dict[str, Any]:
    """The plan of registering Nomad job ``job`` as ``name``.

    :raises JobError: the job is invalid.
    """
    new_job, document = evaluate_job_text(shapes.given(job), "json", "<api>", {})  # as a registration takes it
    current = _current(agent, shapes, name)
    changed = current is None or replace(current.job, warnings=[]) != replace(new_job, warnings=[])
    kinds = group_updates(current.job, new_job) if current else {}  # once for every group: linear in the job's size
    updates = {group.name: _desired(current, kinds, group, changed) for group in new_job.groups}
    gone = {name: live for name, live in (current.live if current else {}).items() if name not in updates}
    updates |= {name: {"Stop": live} for name, live in sorted(gone.items())}
    diff = job_diff(_nomad(shapes, current.document, current.stopped) if current else None,
                    _nomad(shapes, document["job"], False))
    _annotate(diff, updates, kinds)
    failed = _unplaceable(agent, shapes, new_job, updates)
    zero = dict.fromkeys(("Ignore", "Place", "Migrate", "Stop", "InPlaceUpdate", "DestructiveUpdate", "Canary",
                          "Preemptions"), 0)
    return {"JobModifyIndex": shapes.job_modify_index(name) or 0, "CreatedEvals": None, "Diff": diff,
            "Annotations": {"DesiredTGUpdates": {group: zero | counts for group, counts in updates.items()},
                            "PreemptedAllocs": None},
            "FailedTGAllocs": {group: metric.model_dump(mode="json") for group, metric in failed.items()} or None,
            "NextPeriodicLaunch": _next_launch(new_job.periodic), "Warnings": "\n".join(new_job.warnings)}


def _next_launch(periodic: Periodic | None) -> str:
    """When a periodic job submitted now would launch first (Go's zero time: never, or not periodic)."""
    launch = next_launch_time(periodic, datetime.now(UTC)) if periodic is not None and periodic.enabled else None
    return models.ZERO_TIME if launch is None else launch.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class _Current:
    """A job's current version, as a job and as its canonical ``job`` map; its live allocations by group,
    and whether it is stopped."""

    job: Job
    document: dict[str, Any]
    live: dict[str, int]
    stopped: bool


def _current(agent: app.Agent, shapes: Shapes, name: str) -> _Current | None:
    """Job ``name``'s current version; None if there is none."""
    parent = agent.parent(name)
    try:
        allocs = agent.job(name)
    except NotFound:
        return None
    if parent is not None:
        return _Current(*_evaluated(parent.source), {}, parent.status == "stopped")
    latest = agent.job_versions(name)[-1:]
    record = latest[0].record if latest else None
    if record is None:
        return None
    live: dict[str, int] = {}
    for alloc in allocs:
        if alloc.job_id == record.id and alloc.status in ("pending", "running") and not alloc.stopping:
            live[alloc.group.name] = live.get(alloc.group.name, 0) + 1
    return _Current(*_evaluated(record), live, shapes.stopped(name, allocs))


def _evaluated(submitted: JobSource | JobRecord) -> tuple[Job, dict[str, Any]]:
    """A submission as a job and as its canonical ``job`` map."""
    job, document = evaluate_job_text(submitted.text, submitted.format, submitted.source, submitted.variables)
    return job, document["job"]


def _desired(current: _Current | None, kinds: dict[str, UpdateKind], group: Group, changed: bool) -> dict[str, int]:
    """What ``group`` of the new version undergoes, in Nomad's DesiredUpdates fields: its allocations
    placed or stopped for its count, the others updated as Nomad's scheduler decides (``kinds``; every
    one of a job that changed is, to its new version)."""
    live = current.live.get(group.name, 0) if current else 0
    kind = kinds.get(group.name, UpdateKind.DESTRUCTIVE)
    counts = {"Place": max(0, group.count - live), "Stop": max(0, live - group.count)}
    if kept := min(live, group.count):
        field = "DestructiveUpdate" if kind is UpdateKind.DESTRUCTIVE else "InPlaceUpdate" if changed else "Ignore"
        counts[field] = kept
    return {key: value for key, value in counts.items() if value}


def _nomad(shapes: Shapes, job: dict[str, Any], stopped: bool) -> dict[str, Any]:
    """A canonical job in Nomad's JSON, with the fields a Nomad server fills in (both sides of a
    diff written alike, whatever shape each was submitted in): a change of one restart field shows
    beside the others, as Nomad's."""
    document = shapes.job_document(to_nomad({"job": job})["Job"]) | {"Stop": stopped}
    restart = _RESTART_DEFAULTS.get(str(document["Type"]), _RESTART_DEFAULTS["service"])
    for group in document["TaskGroups"]:
        group["RestartPolicy"] = restart | {k: v for k, v in (group.get("RestartPolicy") or {}).items()
                                            if v is not None}
    return document


def _annotate(diff: dict[str, Any], updates: dict[str, dict[str, int]], kinds: dict[str, UpdateKind]) -> None:
    """Nomad's annotations of a plan's diff (scheduler/annotate.go): each group's updates, what a
    change of its count forces, and what each changed task forces (``kinds``: each group's update,
    of those the current version has)."""
    for group in diff["TaskGroups"] or []:
        counts = updates.get(group["Name"], {})
        group["Updates"] = {_UPDATE_NAMES[key]: value for key, value in counts.items() if key in _UPDATE_NAMES}
        for field in group["Fields"] or []:
            if field["Name"] == "Count":
                before, after = int(field["Old"] or 0), int(field["New"] or 0)
                field["Annotations"] = ["forces create"] if before < after else \
                    ["forces destroy"] if after < before else None
        kind = UpdateKind.NONE if group["Type"] != EDITED else kinds.get(group["Name"], UpdateKind.NONE)
        for task in group["Tasks"] or []:
            if group["Type"] in (ADDED, DELETED) or task["Type"] in (ADDED, DELETED):
                task["Annotations"] = ["forces create" if task["Type"] == ADDED else "forces destroy"]
            elif kind in _TASK_ANNOTATIONS:
                task["Type"] = EDITED if task["Type"] == NONE else task["Type"]
                task["Annotations"] = [_TASK_ANNOTATIONS[kind]]


def _unplaceable(agent: app.Agent, shapes: Shapes, job: Job, updates: dict[str, dict[str, int]]) \
        -> dict[str, models.AllocationMetric]:
    """The groups whose new allocations could not be placed, with why, as Nomad's AllocationMetric:
    a draining node is eligible for nothing, a driver not healthy filters it out, and so do the
    node's checks of the job (:mod:`herder.client.feasibility`: its constraints, host volumes, disk...)."""
    healthy = {name for name, info in shapes.drivers().items() if info.Healthy}
    datacenter = agent.config.datacenter
    node = agent.node()
    failed: dict[str, models.AllocationMetric] = {}
    for group in job.groups:
        wanted = updates.get(group.name, {})
        if not wanted.get("Place") and not wanted.get("DestructiveUpdate"):
            continue
        missing = {task.driver for task in group.tasks} - healthy
        if agent.draining:
            failed[group.name] = models.AllocationMetric(NodesEvaluated=0, NodesAvailable={datacenter: 0})
        elif missing:
            failed[group.name] = models.AllocationMetric(NodesFiltered=1, NodesAvailable={datacenter: 1},
                                                         ConstraintFiltered={"missing drivers": 1})
        elif (unplaced := agent.client.feasibility.group(job, group, node)) is not None:
            failed[group.name] = allocation_metric(unplaced, datacenter)
    return failed

