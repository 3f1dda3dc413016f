"""Smaller keys of Nomad's groups and tasks, read and checked as Nomad's validation does:
``max_run_duration``, ``scaling``, ``consul`` and the task's ``identity`` blocks.

Each reader takes the block of a document that passed the job schema, the block's path, and
``problem`` to report what Nomad refuses too, naming the path.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any

from herder.jobspec.paths import Path
from herder.model import DEFAULT_IDENTITY, Identity, Scaling
from herder.sdk.durations import parse_duration

Problem = Callable[[Path, str], None]

TIMED_TYPES = ("batch", "sysbatch")
"""The job types whose groups may have a ``max_run_duration`` (Nomad's ``TaskGroup.Validate``)."""
_IDENTITY_NAME = re.compile(r"[a-zA-Z0-9_-]{1,128}")
MAX_IDENTITIES = 100
"""How many ``identity`` blocks a task may have: each is an RSA signature at every start of the task
(a millisecond of the agent's CPU) and a token of most of a kilobyte in its environment or its files."""
DEFAULT_AUDIENCE = "nomadproject.io"
"""The audience of a task's default identity, whatever its block says (Nomad's ``IdentityDefaultAud``)."""


def max_run_duration(spec: dict[str, Any], path: Path, job_type: str, problem: Problem) -> float:
    """The group's ``max_run_duration`` in seconds (0: none)."""
    if "max_run_duration" not in spec:
        return 0.0
    here = (*path, "max_run_duration")
    seconds = parse_duration(spec["max_run_duration"])
    if seconds <= 0:
        problem(here, "must be greater than zero")
    if job_type not in TIMED_TYPES:
        problem(here, f"a {job_type} job does not allow max_run_duration (only batch and sysbatch jobs do)")
    return seconds


def scaling(spec: dict[str, Any] | None, path: Path, count: int, problem: Problem) -> Scaling | None:
    """The group's ``scaling`` block, checked as Nomad's ``validateScalingPolicy``: ``min`` defaults to
    the group's count, ``max`` is required, and the count lies between them."""
    if spec is None:
        return None
    if "max" not in spec:
        problem(path, 'argument "max" is required')
    low, high = int(spec.get("min", count)), int(spec.get("max", count))
    if high < low:
        problem((*path, "max"), f"maximum count must not be less than minimum count ({high} < {low})")
    elif count > high:
        problem((*path, "max"), f"task group count must not be greater than maximum count in scaling policy "
                                f"({count} > {high})")
    elif count < low:
        problem((*path, "min"), f"task group count must not be less than minimum count in scaling policy "
                                f"({count} < {low})")
    return Scaling(min=low, max=high, enabled=bool(spec.get("enabled", True)), policy=dict(spec.get("policy", {})))


def consul_namespaces(job: dict[str, Any]) -> list[str]:
    """The Consul namespaces a job's groups ask for (``consul { namespace }``), each once."""
    found: list[str] = []
    for group in job.get("groups", []):
        namespace = str(group.get("consul", {}).get("namespace", ""))
        if namespace and namespace not in found:
            found.append(namespace)
    return found


def identities(specs: list[dict[str, Any]], path: Path, problem: Problem) -> tuple[Identity, ...]:
    """A task's ``identity`` blocks, checked as Nomad's ``WorkloadIdentity.Validate``; the default
    one (no name, or ``default``) has Nomad's own audience and no expiry."""
    found: list[Identity] = []
    names: set[str] = set()
    if len(specs) > MAX_IDENTITIES:
        problem(path, f"{len(specs)} identities, more than the {MAX_IDENTITIES} a task may have")
        return ()
    for index, spec in enumerate(specs):
        here = (*path, index)
        name = spec.get("name") or DEFAULT_IDENTITY
        if not _IDENTITY_NAME.fullmatch(name):
            problem((*here, "name"), f"invalid name {name!r} (1-128 letters, digits, '-' or '_')")
        elif name in names:
            problem((*here, "name"), f"duplicate identity {name!r}")
        names.add(name)
        ttl = parse_duration(spec["ttl"]) if "ttl" in spec else 0.0
        if ttl > 0 and name == DEFAULT_IDENTITY:
            problem((*here, "ttl"), "ttl for default identity not yet supported (Nomad refuses it too)")
        filepath = spec.get("filepath", "")
        if filepath and not spec.get("file", False):
            problem((*here, "filepath"), "file must be true in order to specify filepath")
        elif filepath and _escapes(filepath):
            problem((*here, "filepath"), f"{filepath!r} must stay inside the task directory")
        audience = tuple(spec.get("aud", []))
        for position, value in enumerate(audience):
            if not value:
                problem((*here, "aud", position), "an empty string is an invalid audience")
        found.append(Identity(
            name=name,
            audience=(DEFAULT_AUDIENCE,) if name == DEFAULT_IDENTITY else audience,
            env=bool(spec.get("env", False)),
            file=bool(spec.get("file", False)),
            filepath=filepath,
            ttl=ttl,
        ))
    return tuple(found)


def _escapes(value: str) -> bool:
    normal = posixpath.normpath(value)
    return value.startswith("/") or normal == ".." or normal.startswith("../")
