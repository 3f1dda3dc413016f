"""The agent's versions and deployments: history, revert, scale, and the deployments' controls.

What each does is the client's (:mod:`herder.client.scheduler`,
:mod:`herder.client.deployments`); here they get the names and the errors
the front ends show, and the history its differences.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from herder.app.errors import Conflict, NotFound, OutOfBounds
from herder.client.client import Client
from herder.client.deployments import Deployment, DeploymentError
from herder.client.versions import Version
from herder.errors import JobError
from herder.model import Job


@dataclass(frozen=True)
class Change:
    """A field of a job that differs between two versions: ``+`` added, ``-`` removed, ``~`` changed;
    its values as JSON ("" where it has none, ``{...}`` for a named block as a whole)."""

    kind: str
    path: str
    old: str = ""
    new: str = ""

    def __str__(self) -> str:
        if self.kind == "~":
            return f"~ {self.path}: {self.old} -> {self.new}"
        return f"{self.kind} {self.path}: {self.new if self.kind == '+' else self.old}"


@dataclass(frozen=True)
class HistoryEntry:
    """A version with what changed from the one before it (empty for the first version)."""

    version: Version
    changes: list[Change]


def job_diff(old: Job, new: Job) -> list[Change]:
    """The fields that differ between two versions of a job, one line each, by path
    (``groups.web.tasks.server.env.VERSION``): lists of named blocks are keyed by name, and a
    named block added or removed is one line."""
    before, after = dict(_flatten(_document(old))), dict(_flatten(_document(new)))
    blocks = {path for path, value in (before | after).items() if value == _BLOCK
              and (path in before) != (path in after)}
    lines: list[Change] = []
    for path in sorted(before.keys() | after.keys()):
        # Each prefix of the path looked up, not each block tried: a job whose thousands of groups
        # were renamed made every history read compare each path with each block, minutes of a
        # worker thread (hours for a job of a megabyte), on every read.
        if any(path[:at] in blocks for at, char in enumerate(path) if char == "."):
            continue
        if path not in after:
            lines.append(Change("-", path, old=before[path]))
        elif path not in before:
            lines.append(Change("+", path, new=after[path]))
        elif before[path] != after[path]:
            lines.append(Change("~", path, before[path], after[path]))
    return lines


_BLOCK = "{...}"
"""The value of a named block itself, in a flattened document."""


def _document(job: Job) -> dict[str, Any]:
    document = dataclasses.asdict(job)
    for key in ("warnings", "source", "lines", "payload"):
        document.pop(key, None)
    return document


def _flatten(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _flatten(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)) and value and all(isinstance(i, dict) and "name" in i for i in value):
        for item in value:
            yield f"{path}.{item['name']}", _BLOCK
            yield from _flatten({k: v for k, v in item.items() if k != "name"}, f"{path}.{item['name']}")
    else:
        yield path, json.dumps(value, default=str)


class Rollouts:
    """Versions and deployments of ``client``'s jobs; ``lock`` orders them with the submissions."""

    def __init__(self, client: Client, lock: threading.Lock, draining: threading.Event | None = None) -> None:
        self.client = client
        self._lock = lock
        self._draining = draining or threading.Event()

    def _check_taking(self) -> None:
        # A revert and a scale are submissions, which place new allocations: an agent draining or
        # marked ineligible takes none, as it refuses a job submitted (both were placed at once).
        if self._draining.is_set():
            raise Conflict("the agent takes no new job: it is draining, or not eligible")

    # -- versions --------------------------------------------------------------

    def history(self, name: str) -> list[HistoryEntry]:
        """The versions of job ``name``, newest first, each with its changes from the one before.

        :raises NotFound: the job has no version."""
        versions = self.client.versions.of(name)
        if not versions:
            raise NotFound(f"no job {name!r}")
        entries: list[HistoryEntry] = []
        previous: Job | None = None
        for version in versions:
            job = self._load(version)
            changes = job_diff(previous, job) if previous is not None and job is not None else []
            entries.append(HistoryEntry(version, changes))
            previous = job
        return entries[::-1]

    def _load(self, version: Version) -> Job | None:
        try:
            return self.client.versions.load(version)
        except JobError:
            return None  # its submission was collected, or no longer loads: shown without changes

    def revert(self, name: str, number: int) -> Version:
        """Submit version ``number`` of job ``name`` again (a new version).

        :raises NotFound: no such job or version.
        :raises Conflict: the version cannot be loaded again, or placed; the agent takes no new job."""
        if self.client.versions.number(name, number) is None:
            self.history(name)  # NotFound for no job
            raise NotFound(f"job {name!r} has no version {number}")
        self._check_taking()
        with self._lock:
            try:
                return self.client.scheduler.revert(name, number)
            except JobError as exc:
                raise Conflict(str(exc)) from None

    def scale(self, name: str, group: str, count: int) -> Version:
        """Set ``group`` of job ``name`` to ``count`` allocations (a new version, placed in place).

        :raises NotFound: no such job or group.
        :raises OutOfBounds: the count is outside the group's ``scaling`` bounds (Nomad's words).
        :raises Conflict: the count is out of range; the agent takes no new job."""
        if not 0 <= count <= 1000:
            raise Conflict(f"count must be between 0 and 1000, not {count}")
        latest = self.client.versions.latest(name)
        job = self._load(latest) if latest is not None else None
        if job is None:
            raise NotFound(f"no job {name!r}")
        found = next((g for g in job.groups if g.name == group), None)
        if found is None:
            raise NotFound(f"job {name!r} has no group {group!r}")
        if found.scaling is not None and count < found.scaling.min:
            raise OutOfBounds(f"group count was less than scaling policy minimum: {count} < {found.scaling.min}")
        if found.scaling is not None and count > found.scaling.max:
            raise OutOfBounds(f"group count was greater than scaling policy maximum: {count} > {found.scaling.max}")
        self._check_taking()
        with self._lock:
            return self.client.scheduler.scale(name, group, count)

    # -- deployments -------------------------------------------------------------

    def deployments(self, job: str | None = None) -> list[Deployment]:
        """The deployments of ``job`` (of every job: None), newest first."""
        return self.client.deployments.of_job(job)

    def deployment(self, prefix: str) -> Deployment:
        """The deployment whose ID starts with ``prefix``.

        :raises NotFound: none does.
        :raises Conflict: more than one does."""
        found = [d for d in self.client.deployments.of_job() if d.id.startswith(prefix)]
        if not found:
            raise NotFound(f"no deployment {prefix!r}")
        if len(found) > 1:
            raise Conflict(f"deployment prefix {prefix!r} is ambiguous: {', '.join(d.id for d in found)}")
        return found[0]

    def latest(self, job: str) -> Deployment:
        """The latest deployment of ``job``.

        :raises NotFound: it has none."""
        found = self.client.deployments.of_job(job)
        if not found:
            raise NotFound(f"job {job!r} has no deployment")
        return found[0]

    def promote(self, deployment: Deployment, groups: Iterable[str] = ()) -> Deployment:
        return self._control(lambda: self.client.deployments.promote(deployment.id, groups))

    def fail(self, deployment: Deployment) -> Deployment:
        return self._control(lambda: self.client.deployments.fail(deployment.id))

    def pause(self, deployment: Deployment, paused: bool) -> Deployment:
        return self._control(lambda: self.client.deployments.pause(deployment.id, paused))

    def set_health(self, deployment: Deployment, healthy: Iterable[str], unhealthy: Iterable[str]) -> Deployment:
        return self._control(lambda: self.client.deployments.set_health(deployment.id, healthy, unhealthy))

    @staticmethod
    def _control(change: Callable[[], Deployment]) -> Deployment:
        try:
            result = change()
        except DeploymentError as exc:
            raise Conflict(str(exc)) from None
        return result
