"""``nomad job plan``: what registering a job would do, without doing it (Nomad's ``JobPlanResponse``).

The difference of the job to its current version (:mod:`.diff`), what each
group's allocations would undergo, as Nomad's scheduler decides it
(:func:`herder.jobspec.update_kind.group_updates`), the allocations that could
not be placed, and the ``JobModifyIndex`` that ``nomad job run -check-index``
then enforces (:func:`enforce_index`).
"""

from __future__ import annotations

import json
from typing import Any

from herder import app
from herder.agent.nomad import models
from herder.agent.nomad.diff import ADDED, DELETED, EDITED, NONE, job_diff
from herder.agent.nomad.ledger import SECOND
from herder.agent.nomad.shapes import NomadError, Shapes
from herder.app import NotFound
from herder.jobspec import evaluate_job_text
from herder.jobspec.nomad_json import to_nomad
from herder.jobspec.update_kind import UpdateKind, group_updates

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
    new_job, document = evaluate_job_text(json.dumps({"Job": job}), "json", "<api>", {})
    new = document["job"]
    old, live, stopped = _current(agent, shapes, name)
    kinds = group_updates(old, new) if old is not None else {}  # once for every group: linear in the job's size
    updates = {group.name: _desired(kinds.get(group.name, UpdateKind.DESTRUCTIVE), group.count,
                                    live.get(group.name, 0))
               for group in new_job.groups}
    for group in sorted(set(live) - set(updates)):
        updates[group] = {"Stop": live[group]}
    diff = job_diff(_nomad(shapes, old, stopped) if old is not None else None, _nomad(shapes, new, False))
    _annotate(diff, updates, kinds)
    failed = _unplaceable(agent, shapes, new_job.groups, updates)
    zero = dict.fromkeys(("Ignore", "Place", "Migrate", "Stop", "InPlaceUpdate", "DestructiveUpdate", "Canary",
                          "Preemptions"), 0)
    return {"JobModifyIndex": shapes.job_modify_index(name) or 0, "CreatedEvals": None, "Diff": diff,
            "Annotations": {"DesiredTGUpdates": {group: zero | counts for group, counts in updates.items()},
                            "PreemptedAllocs": None},
            "FailedTGAllocs": {group: metric.model_dump(mode="json") for group, metric in failed.items()} or None,
            "NextPeriodicLaunch": models.ZERO_TIME, "Warnings": "\n".join(new_job.warnings)}


def _current(agent: app.Agent, shapes: Shapes, name: str) -> tuple[dict[str, Any] | None, dict[str, int], bool]:
    """Job ``name``'s current version (canonical ``job`` map; None if there is none), its live
    allocations by group, and whether it is stopped."""
    parent = agent.parent(name)
    try:
        allocs = agent.job(name)
    except NotFound:
        return None, {}, False
    if parent is not None:
        return app.canonical_document(parent.source)["job"], {}, parent.status == "stopped"
    latest = agent.job_versions(name)[-1:]
    record = latest[0].record if latest else None
    if record is None:
        return None, {}, False
    live: dict[str, int] = {}
    for alloc in allocs:
        if alloc.job_id == record.id and alloc.status in ("pending", "running") and not alloc.stopping:
            live[alloc.group.name] = live.get(alloc.group.name, 0) + 1
    return app.canonical_document(record)["job"], live, shapes.stopped(name, allocs)


def _desired(kind: UpdateKind, count: int, live: int) -> dict[str, int]:
    """What a group (its update ``kind``, ``count`` wanted, ``live`` running) undergoes, in Nomad's DesiredUpdates
    fields."""
    kept = min(live, count)
    counts = {"Place": max(0, count - live), "Stop": max(0, live - count)}
    if kept:
        field = {UpdateKind.NONE: "Ignore", UpdateKind.COUNT: "InPlaceUpdate", UpdateKind.IN_PLACE: "InPlaceUpdate",
                 UpdateKind.DESTRUCTIVE: "DestructiveUpdate"}[kind]
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
    change of its count forces, and what each changed task forces (``kinds``: each group's update, of
    those the current version has)."""
    for group in diff["TaskGroups"] or []:
        counts = updates.get(group["Name"], {})
        group["Updates"] = {_UPDATE_NAMES[key]: value for key, value in counts.items() if key in _UPDATE_NAMES}
        for field in group["Fields"] or []:
            if field["Name"] == "Count":
                before, after = int(field["Old"] or 0), int(field["New"] or 0)
                field["Annotations"] = ["forces create"] if before < after else \
                    ["forces destroy"] if after < before else None
        kind = kinds.get(group["Name"], UpdateKind.NONE) if group["Type"] == EDITED else UpdateKind.NONE
        for task in group["Tasks"] or []:
            if group["Type"] in (ADDED, DELETED) or task["Type"] in (ADDED, DELETED):
                task["Annotations"] = ["forces create" if task["Type"] == ADDED else "forces destroy"]
            elif kind in _TASK_ANNOTATIONS:
                task["Type"] = EDITED if task["Type"] == NONE else task["Type"]
                task["Annotations"] = [_TASK_ANNOTATIONS[kind]]


def _unplaceable(agent: app.Agent, shapes: Shapes, groups: Any, updates: dict[str, dict[str, int]]) \
        -> dict[str, models.AllocationMetric]:
    """The groups whose new allocations could not be placed, with why, as Nomad's AllocationMetric:
    a draining node is eligible for nothing, a driver not healthy filters it out."""
    healthy = {name for name, info in shapes.drivers().items() if info.Healthy}
    datacenter = agent.config.datacenter
    failed: dict[str, models.AllocationMetric] = {}
    for group in groups:
        wanted = updates.get(group.name, {})
        if not wanted.get("Place") and not wanted.get("DestructiveUpdate"):
            continue
        missing = {task.driver for task in group.tasks} - healthy
        if agent.draining:
            failed[group.name] = models.AllocationMetric(NodesEvaluated=0, NodesAvailable={datacenter: 0})
        elif missing:
            failed[group.name] = models.AllocationMetric(NodesFiltered=1, NodesAvailable={datacenter: 1},
                                                         ConstraintFiltered={"missing drivers": 1})
    return failed

