"""Checking each task's ``config`` against its driver's JSON Schema.

A value that still holds a ``${...}`` reference is resolved only when the task
starts, so a failure on such a string is not reported here; the runner checks
the interpolated config again before starting the task.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jsonschema import SchemaError, ValidationError
from jsonschema.validators import validator_for

from herder.jobspec.paths import Locator, Path, render_path
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
            path: Path = ("job", "groups", group_index, "tasks", task_index)
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


def _config_problems(config: dict[str, Any], schema: dict[str, Any] | None) -> list[Problem]:
    if schema is None:
        return []
    validator_class = validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except SchemaError as exc:
        return [(("config",), f"cannot be checked, the driver's schema is invalid: {exc.message}")]
    problems = schema_problems(config, validator_class(schema), ignore=_unresolved)
    return [(("config", *path), message) for path, message in problems]
