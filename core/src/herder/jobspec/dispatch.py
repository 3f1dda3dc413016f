"""The children of periodic and parameterized jobs, made from the parent's canonical document.

A periodic job is never run itself: at each launch time the child
``NAME/periodic-<unix seconds>`` is, a copy without the ``periodic`` block. A
parameterized job is dispatched: the child ``NAME/dispatch-<unix
seconds>-<8 hex>`` is a copy without the ``parameterized`` block, with the
dispatcher's meta merged into the job's and the payload kept for the tasks'
``dispatch_payload`` files. Each child records its parent's name
(``parent_id``, its tasks' ``NOMAD_JOB_PARENT_ID``). As Nomad, a job both
periodic and parameterized launches only once dispatched: its dispatched
children are periodic.

A child is an ordinary job with a canonical document of its own, which is
what the agent stores: loaded again, it gives the same job. These are pure
functions of the parent's document and the time; the agent calls them.
"""

from __future__ import annotations

import base64
import copy
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from herder.errors import DispatchError
from herder.jobspec.cron import load_zone, next_launch, parse_cron
from herder.jobspec.load import as_written, load_job_text
from herder.model import MAX_PAYLOAD, PAYLOAD_FORBIDDEN, PAYLOAD_REQUIRED, Job, Parameterized, Periodic

PERIODIC_SUFFIX = "/periodic-"
DISPATCH_SUFFIX = "/dispatch-"


@dataclass(frozen=True)
class Child:
    """A job made from a periodic or parameterized one."""

    job: Job
    document: dict[str, Any]
    """Its canonical document: ``json.dumps`` of it is what to store, and loads as ``job`` again."""


def next_launch_time(periodic: Periodic, after: datetime) -> datetime | None:
    """The first launch of ``periodic`` after ``after`` (aware), read in its time zone
    and given in it; None when its crons never match again."""
    zone = load_zone(periodic.time_zone)
    return next_launch((parse_cron(cron) for cron in periodic.crons), after.astimezone(zone))


def periodic_child(document: Mapping[str, Any], launch: datetime) -> Child:
    """The child launched at ``launch`` (a forced launch: now) of the periodic job of ``document``.

    :raises DispatchError: when the job does not launch children (not periodic,
        disabled, or parameterized and not yet dispatched).
    """
    parent = _load(document, "<parent>")
    if not parent.launches:
        why = "is not periodic" if parent.periodic is None else \
            "has its periodic launches disabled" if not parent.periodic.enabled else \
            "is parameterized: its dispatched children are the periodic ones"
        raise DispatchError([f"job {parent.name!r} {why}"])
    return _child(document, f"{parent.name}{PERIODIC_SUFFIX}{int(launch.timestamp())}", parent, drop="periodic")


def dispatch_child(document: Mapping[str, Any], meta: Mapping[str, str], payload: bytes, now: datetime) -> Child:
    """The child of the parameterized job of ``document`` dispatched at ``now`` with ``meta`` and ``payload``.

    :raises DispatchError: listing every way the dispatch breaks the job's
        ``parameterized`` block; nothing is made then.
    """
    parent = _load(document, "<parent>")
    if parent.parameterized is None:
        raise DispatchError([f"job {parent.name!r} is not parameterized"])
    problems = dispatch_problems(parent.parameterized, meta, payload)
    if problems:
        raise DispatchError([f"cannot dispatch job {parent.name!r}: {problem}" for problem in problems])
    name = f"{parent.name}{DISPATCH_SUFFIX}{int(now.timestamp())}-{secrets.token_hex(4)}"
    extra: dict[str, Any] = {"meta": {**document["job"].get("meta", {}), **as_written(dict(meta))}}
    if payload:
        extra["payload"] = base64.b64encode(payload).decode("ascii")
    return _child(document, name, parent, drop="parameterized", extra=extra)


def dispatch_problems(parameterized: Parameterized, meta: Mapping[str, str], payload: bytes) -> list[str]:
    """Every way a dispatch with ``meta`` and ``payload`` breaks ``parameterized`` (Nomad's checks)."""
    problems: list[str] = []
    if parameterized.payload == PAYLOAD_REQUIRED and not payload:
        problems.append("the job requires a payload and none was given")
    if parameterized.payload == PAYLOAD_FORBIDDEN and payload:
        problems.append(f"the job forbids a payload and one of {len(payload)} bytes was given")
    if len(payload) > MAX_PAYLOAD:
        problems.append(f"the payload is {len(payload)} bytes, more than the {MAX_PAYLOAD} (16 KiB) allowed")
    declared = {*parameterized.meta_required, *parameterized.meta_optional}
    unknown = [key for key in meta if key not in declared]
    if unknown:
        problems.append(f"meta {_keys(unknown)} not declared by the job (meta_required: "
                        f"{_keys(parameterized.meta_required) or 'none'}; meta_optional: "
                        f"{_keys(parameterized.meta_optional) or 'none'})")
    missing = [key for key in parameterized.meta_required if key not in meta]
    if missing:
        problems.append(f"missing required meta {_keys(missing)}")
    return problems


def _keys(keys: Iterable[str]) -> str:
    return ", ".join(repr(key) for key in keys)


def _load(document: Mapping[str, Any], source: str) -> Job:
    return load_job_text(json.dumps(document), "json", source)


def _child(document: Mapping[str, Any], name: str, parent: Job, *, drop: str,
           extra: Mapping[str, Any] | None = None) -> Child:
    spec = {key: value for key, value in copy.deepcopy(document["job"]).items() if key != drop}
    spec |= {"name": name, "parent_id": parent.name, **(extra or {})}
    child = {"job": spec}
    return Child(job=_load(child, name), document=child)
