"""A group's ``reschedule`` and ``ephemeral_disk`` blocks, with Nomad's defaults and checks.

The policy is the group's block over the job's over the job type's default
(Nomad's ``ReschedulePolicy.Merge`` in its API's canonicalisation), checked as
Nomad's ``ReschedulePolicy.Validate`` does (the attempts must fit in the
interval with their delays), but for two floors: Nomad refuses
a ``delay`` under 5 s and an ``interval`` under 15 s to spare its servers;
a single host has no such need, and a test or a fast-failing job may want less.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from herder.jobspec.paths import Path
from herder.model import DELAY_FUNCTIONS, EphemeralDisk, ReschedulePolicy
from herder.sdk.durations import format_duration, parse_duration

HOUR = 3600.0

RESCHEDULE_DEFAULTS: dict[str, dict[str, Any]] = {
    "service": {"delay": 30.0, "delay_function": "exponential", "max_delay": HOUR, "unlimited": True},
    "batch": {"attempts": 1, "interval": 24 * HOUR, "delay": 5.0, "delay_function": "constant"},
}
"""Nomad's default policy of each job type that is rescheduled (``DefaultServiceJobReschedulePolicy``,
``DefaultBatchJobReschedulePolicy``); system and sysbatch jobs are not."""

_DURATIONS = ("interval", "delay", "max_delay")

Problem = Callable[[Path, str], None]
"""Reports a problem at a path of the document."""


def reschedule_fields(spec: dict[str, Any]) -> dict[str, Any]:
    """The fields a ``reschedule`` block sets, durations in seconds."""
    fields = {key: spec[key] for key in ("attempts", "delay_function", "unlimited") if key in spec}
    if "attempts" in fields:
        fields["attempts"] = int(fields["attempts"])
    return fields | {key: parse_duration(spec[key]) for key in _DURATIONS if key in spec}


def reschedule_policy(job: dict[str, Any], group: dict[str, Any], path: Path,
                      problem: Problem) -> ReschedulePolicy | None:
    """The policy of ``group`` of ``job`` (documents that passed the schema); None for a job
    type that is never rescheduled. ``path`` is the group's."""
    job_type = job.get("type", "service")
    defaults = RESCHEDULE_DEFAULTS.get(job_type)
    if defaults is None:
        for where, spec in ((("job",), job), (path, group)):
            if "reschedule" in spec:
                problem((*where, "reschedule"), f"{job_type} jobs are not rescheduled: remove the block")
        return None
    policy = ReschedulePolicy(**(defaults | reschedule_fields(job.get("reschedule", {}))
                                 | reschedule_fields(group.get("reschedule", {}))),
                              given="reschedule" in job or "reschedule" in group)
    check_policy(policy, (*path, "reschedule"), problem)
    return policy


def check_policy(policy: ReschedulePolicy, path: Path, problem: Problem) -> None:
    """Nomad's ``ReschedulePolicy.Validate`` (without its floors: see the module's description)."""
    if not policy.enabled:
        return
    if policy.attempts > 0:
        if policy.interval <= 0:
            problem((*path, "interval"), "must be given when attempts is more than 0")
        if policy.unlimited:
            problem(path, f"attempts = {policy.attempts} with unlimited = true is ambiguous: give one of them")
    if policy.delay_function not in DELAY_FUNCTIONS:
        problem((*path, "delay_function"), f"must be one of {', '.join(DELAY_FUNCTIONS)}")
        return
    if policy.delay_function != "constant" and policy.max_delay < policy.delay:
        problem((*path, "max_delay"), f"{format_duration(policy.max_delay)} is less than the delay "
                                      f"({format_duration(policy.delay)})")
        return
    if not policy.unlimited and policy.interval > 0:
        possible, needed = _viable_attempts(policy)
        if possible < policy.attempts:
            problem((*path, "interval"), f"only {possible} of the {policy.attempts} attempts fit in "
                                         f"{format_duration(policy.interval)} with these delays: make it at "
                                         f"least {format_duration(needed)}")


def _viable_attempts(policy: ReschedulePolicy) -> tuple[int, float]:
    """How many of the policy's attempts fit in its interval, and the interval all of them need
    (Nomad's ``ReschedulePolicy.viableAttempts``)."""
    attempts, delay, ceiling, interval = policy.attempts, policy.delay, policy.max_delay, policy.interval
    if policy.delay_function == "constant":
        needed = attempts * delay
        return (attempts, needed) if interval >= needed else (int(interval // delay) if delay else attempts, needed)
    if policy.delay_function == "exponential":
        needed, possible = 0.0, 0
        for attempt in range(attempts):
            step = 2 ** attempt * delay
            if step > ceiling:
                needed += ceiling
            else:
                needed = step
            possible += needed < interval
        return possible, needed
    slots = [delay, delay]  # fibonacci: linear by the ceiling once it is reached
    at_ceiling = False
    for attempt in range(2, attempts):
        step = slots[attempt - 1] + (ceiling if at_ceiling else slots[attempt - 2])
        if not at_ceiling and step > ceiling:
            step, at_ceiling = ceiling, True
        slots.append(step)
    needed = slots[-1]
    if interval >= needed:
        return attempts, needed
    return next((index for index, slot in enumerate(slots) if slot > interval), len(slots)), needed


def ephemeral_disk(spec: dict[str, Any], task_disks: Sequence[int] = ()) -> EphemeralDisk:
    """A group's ``ephemeral_disk`` block (a document that passed the schema). Without a ``size``, the
    sum of its tasks' ``resources.disk`` where they give one, as Nomad reads job files of before
    ``ephemeral_disk``; else Nomad's 300 MB."""
    size = spec.get("size", sum(task_disks) or 300)
    return EphemeralDisk(size=int(size), sticky=bool(spec.get("sticky", False)),
                         migrate=bool(spec.get("migrate", False)))
