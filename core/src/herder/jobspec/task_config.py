"""Checking each task's ``config`` against its driver's JSON Schema.

A value that still holds a ``${...}`` reference is resolved only when the task
starts, so a failure on such a string is not reported here; the runner checks
the interpolated config again before starting the task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from herder.jobspec.connect import task_path
from herder.jobspec.paths import Locator, render_path
from herder.jobspec.validate import Problem, schema_problems
from herder.model import Job


def _unresolved(error: ValidationError) -> bool:
    return isinstance(error.instance, str) and "${" in error.instance


def validate_config(task_path: str, config: dict[str, Any], schema: dict[str, Any] | None) -> list[str]:
    """Problems of one task's config, each named ``<task_path>.config.<key>...``.

    ``schema`` None means the driver does not describe its config: nothing to check.
    """
    return [f"{render_path(path, task_path)}: {message}" for path, message in _config_problems(config, schema)]


def validate_task_configs(job: Job, schemas: Mapping[str, dict[str, Any] | None],
                          unavailable: Mapping[str, str] | None = None) -> list[str]:
    """Check every task's driver and config; ``schemas`` maps each available
    driver to its config schema (None when it has none), ``unavailable`` the
    drivers that are installed but cannot be used to the reason why
    ("disabled", "failed to load: ...")."""
    unavailable = unavailable or {}
    locator = Locator(job.source, job.lines)
    available = ", ".join(sorted(schemas)) or "none"
    errors: list[str] = []
    for group_index, group in enumerate(job.groups):
        for task_index, task in enumerate(group.tasks):
            path = task_path(group, group_index, task_index)
            if task.driver not in schemas:
                if task.driver in unavailable:
                    message = f"driver {task.driver!r} is {unavailable[task.driver]}"
                else:
                    message = f"unknown driver {task.driver!r} (available: {available})"
                errors.append(locator.format((*path, "driver"), message))
                continue
            found = [
                ((*path, *where), message) for where, message in _config_problems(task.config, schemas[task.driver])
            ]
            found.sort(key=lambda problem: locator.line_of(problem[0]) or 0)
            errors.extend(locator.format(where, message) for where, message in found)
    return errors


def network_problems(job: Job, isolation: Callable[[str], frozenset[str]]) -> list[str]:
    """A task of a group with a network namespace whose driver cannot join it (``isolation``: a
    driver's network isolation modes, its capabilities' ``network_isolation``)."""
    locator = Locator(job.source, job.lines)
    errors: list[str] = []
    for group_index, group in enumerate(job.groups):
        if not group.network.isolated:
            continue
        for task_index, task in enumerate(group.tasks):
            modes = isolation(task.driver)
            if "group" not in modes:
                path = (*task_path(group, group_index, task_index), "driver")
                errors.append(locator.format(path, (
                    f"driver {task.driver!r} cannot join the allocation's network namespace (the group's "
                    f"network mode is {group.network.mode!r}); it runs tasks in: {', '.join(sorted(modes))}")))
    return errors


def merge_blocks(config: Mapping[str, Any], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """``config`` with each list of maps made one map where ``schema`` wants a map, as Nomad's drivers
    read a block of their config: Nomad's HCL 2 writes a block (``port_map { http = 80 }``) as a list
    of one map in its JSON, herder's HCL as the map itself."""
    properties = (schema or {}).get("properties") or {}
    merged = dict(config)
    for key, value in config.items():
        wanted = properties.get(key)
        if not isinstance(wanted, Mapping) or wanted.get("type") != "object":
            continue
        if isinstance(value, list) and value and all(isinstance(item, Mapping) for item in value):
            value = {name: item for block in value for name, item in block.items()}
        if isinstance(value, Mapping):
            merged[key] = merge_blocks(value, wanted)
    return merged


def _config_problems(config: dict[str, Any], schema: dict[str, Any] | None) -> list[Problem]:
    if schema is None:
        return []
    try:
        validator = _validator(schema)
    except SchemaError as exc:
        return [(("config",), f"cannot be checked, the driver's schema is invalid: {exc.message}")]
    problems = schema_problems(config, validator, ignore=_unresolved)
    return [(("config", *path), message) for path, message in problems]


_validators: dict[int, tuple[dict[str, Any], Validator]] = {}


def _validator(schema: dict[str, Any]) -> Validator:
    """A validator of ``schema``, checked once: every start of every task checks its config.

    Drivers return the same schema object every time; keyed by identity, and
    the schema is kept so that its id cannot be reused by another object.
    """
    cached = _validators.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    validator_class = validator_for(schema)
    validator_class.check_schema(schema)
    validator = validator_class(schema)
    _validators[id(schema)] = (schema, validator)
    return validator
