"""Runtime interpolation: ``${NAME}`` in task fields, resolved when a task starts.

Names are looked up with a function that returns None for names it does not
know; such references are left as written, as Nomad leaves them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from herder.model import Artifact, Check, Service, Task, Template

Lookup = Callable[[str], str | None]

_REFERENCE = re.compile(r"\$\{([^{}]+)\}")


def interpolate(value: Any, lookup: Lookup) -> Any:
    """Replace ``${NAME}`` in every string of ``value`` (dicts, lists, tuples too)."""
    if isinstance(value, str):
        return _REFERENCE.sub(lambda match: _resolve(match, lookup), value)
    if isinstance(value, dict):
        return {key: interpolate(item, lookup) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, lookup) for item in value]
    if isinstance(value, tuple):
        return tuple(interpolate(item, lookup) for item in value)
    return value


def _resolve(match: re.Match[str], lookup: Lookup) -> str:
    found = lookup(match.group(1).strip())
    return match.group(0) if found is None else found


def task_lookup(env: Mapping[str, str], node: Lookup, meta: Mapping[str, str]) -> Lookup:
    """Resolve ``attr.<key>``, ``node.*`` and ``meta.<key>`` by ``node`` (the node's own, as
    constraints see them), then ``meta.<key>`` by the job's, group's and task's ``meta``, and any
    variable of the task environment (``NOMAD_*``, ``HERDER_*`` and the rest)."""

    def lookup(name: str) -> str | None:
        if name.startswith(("attr.", "node.", "meta.")):
            found = node(name)
            if found is None and name.startswith("meta."):
                found = meta.get(name.removeprefix("meta."))
            return found
        return env.get(name)

    return lookup


def interpolate_task(task: Task, lookup: Lookup) -> Task:
    """A copy of ``task`` with config, env, meta, services and checks, and
    artifact and template paths interpolated."""
    return dataclasses.replace(
        task,
        config=interpolate(task.config, lookup),
        env=interpolate(task.env, lookup),
        meta=interpolate(task.meta, lookup),
        services=tuple(interpolate_service(service, lookup) for service in task.services),
        artifacts=tuple(_artifact(artifact, lookup) for artifact in task.artifacts),
        templates=tuple(_template(template, lookup) for template in task.templates),
    )


def _fields(obj: Any, names: tuple[str, ...], lookup: Lookup) -> dict[str, Any]:
    return {name: interpolate(getattr(obj, name), lookup) for name in names}


def interpolate_service(service: Service, lookup: Lookup) -> Service:
    """A copy of ``service`` with its name, port, tags, meta and checks interpolated."""
    checks = tuple(_check(check, lookup) for check in service.checks)
    return dataclasses.replace(service, checks=checks, **_fields(service, ("name", "port", "tags", "meta"), lookup))


def _check(check: Check, lookup: Lookup) -> Check:
    names = ("name", "path", "port", "command", "args", "method", "header", "grpc_service")
    return dataclasses.replace(check, **_fields(check, names, lookup))


def _artifact(artifact: Artifact, lookup: Lookup) -> Artifact:
    return dataclasses.replace(artifact, **_fields(artifact, ("source", "destination", "options"), lookup))


def _template(template: Template, lookup: Lookup) -> Template:
    return dataclasses.replace(template, **_fields(template, ("source", "destination"), lookup))
