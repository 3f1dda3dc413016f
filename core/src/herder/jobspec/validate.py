"""JSON Schema validation with messages that name paths in the job document.

The job schema is ``herder/schema/job.schema.json`` (Draft 2020-12); drivers'
``task.config`` schemas go through the same :func:`schema_problems`. A schema
may give a friendlier message for a ``pattern``, ``format`` or ``required``
failure with the (non-standard, annotation-only) ``errorMessage`` keyword.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.protocols import Validator

# The module, not its names: herder.objects itself imports this package.
from herder import objects
from herder.jobspec.hcl_values import to_text
from herder.jobspec.paths import Path, render_path
from herder.jobspec.variables import coerce_scalar
from herder.sdk.durations import parse_duration

Problem = tuple[Path, str]

_FORMATS = FormatChecker(formats=())


@_FORMATS.checks("duration", raises=ValueError)
def _is_duration(value: object) -> bool:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        parse_duration(value)
    return True


@_FORMATS.checks("signal", raises=ValueError)
def _is_signal(value: object) -> bool:
    if isinstance(value, str) and value:
        objects.parse_signal(value)
    return True


_TYPE_NAMES = {
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "boolean": "true or false",
    "array": "a list",
    "object": "a map",
    "null": "null",
}
_CUSTOMISABLE = {"pattern", "format", "required"}


@cache
def job_validator() -> Validator:
    """The validator of the canonical job document, with herder's formats."""
    text = resources.files("herder").joinpath("schema/job.schema.json").read_text(encoding="utf-8")
    return Draft202012Validator(json.loads(text), format_checker=_FORMATS)


def validate_job_document(document: dict[str, Any], coercible: set[str], *, everywhere: bool = False) -> list[Problem]:
    """Validate the canonical document in place.

    Strings at ``coercible`` paths (whole-string variable references), or
    every value with ``everywhere`` (HCL files: cty's conversion), are first
    converted where the schema wants another type: a string to an integer, a
    number or a boolean, a number or a boolean to a string.
    """
    validator = job_validator()
    errors = list(validator.iter_errors(document))
    conversion = _Conversion(coercible, everywhere)
    if conversion.apply(document, errors):
        errors = list(validator.iter_errors(document))
    errors = [error for error in errors if not (error.validator == "type" and
                                                tuple(error.absolute_path) in conversion.failed)]
    return list(conversion.failed.items()) + _problems(errors, ())


def schema_problems(
    instance: Any,
    validator: Validator,
    base: Path = (),
    ignore: Callable[[ValidationError], bool] | None = None,
) -> list[Problem]:
    """Every way ``instance`` fails ``validator``, as (path, message) pairs under ``base``."""
    errors = [error for error in validator.iter_errors(instance) if ignore is None or not ignore(error)]
    return _problems(errors, base)


def _problems(errors: Iterable[ValidationError], base: Path) -> list[Problem]:
    problems: list[Problem] = []
    for error in errors:
        for problem in _describe(error, (*base, *error.absolute_path)):
            if problem not in problems:
                problems.append(problem)
    return problems


def _describe(error: ValidationError, path: Path) -> list[Problem]:
    kind = error.validator
    expected: Any = error.validator_value
    schema: Mapping[str, Any] = error.schema if isinstance(error.schema, Mapping) else {}
    custom = schema.get("errorMessage") if kind in _CUSTOMISABLE else None
    if kind == "required":
        present = error.instance if isinstance(error.instance, dict) else {}
        return [((*path, key), custom or "is required") for key in expected if key not in present]
    if kind == "additionalProperties":
        known = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        instance: Any = error.instance
        extra = [key for key in instance if key not in known and not any(re.search(p, key) for p in patterns)]
        return [((*path, key), f"unknown key {key!r}") for key in extra]
    if custom:
        return [(path, str(custom))]
    found = _value(error.instance)
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        return [(path, "must be " + " or ".join(_TYPE_NAMES.get(name, name) for name in types) + f", not {found}")]
    if kind == "enum":
        return [(path, f"{found} is not one of " + ", ".join(_show(value) for value in expected))]
    if kind == "const":
        return [(path, f"must be {_show(expected)}, not {found}")]
    if kind == "minimum":
        return [(path, f"{found} is below {expected}")]
    if kind == "maximum":
        return [(path, f"{found} is above {expected}")]
    if kind in ("minItems", "minLength") and expected == 1:
        return [(path, "must not be empty")]
    if kind == "minItems":
        return [(path, f"must have at least {expected} items")]
    if kind == "format" and error.cause is not None:
        return [(path, str(error.cause))]
    if kind == "format":
        return [(path, f"must be a valid {expected}")]
    return [(path, error.message)]


def _show(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


_KINDS = {dict: "a map", list: "a list", bool: "a boolean", type(None): "null"}


def _value(value: Any) -> str:
    """The offending value, for a message: a scalar as written, a map or list by its kind."""
    kind = _KINDS.get(type(value))
    if kind is not None and not isinstance(value, bool):
        return kind
    return repr(value) if isinstance(value, str) else json.dumps(value, default=str)


class _Conversion:
    """HCL's type conversion (cty's ``convert``) of the values the schema wants of another type."""

    def __init__(self, coercible: set[str], everywhere: bool) -> None:
        self.coercible = coercible
        self.everywhere = everywhere
        self.failed: dict[Path, str] = {}
        """Values that could not be converted: the problem of each, instead of the schema's."""

    def apply(self, document: dict[str, Any], errors: list[ValidationError]) -> bool:
        """Convert the values of the type ``errors``; whether any changed."""
        changed = False
        for error in errors:
            path = tuple(error.absolute_path)
            if error.validator != "type" or not (self.everywhere or render_path(path) in self.coercible):
                continue
            expected: Any = error.validator_value
            value = self.convert(error.instance, [expected] if isinstance(expected, str) else list(expected), path)
            if value is not None:
                _set(document, path, value)
                changed = True
        return changed

    def convert(self, value: Any, json_types: list[str], path: Path) -> Any:
        """``value`` as the first of ``json_types`` it converts to; None when none (a failed string is noted)."""
        if isinstance(value, (bool, int, float)) and "string" in json_types:
            return to_text(value)
        if not isinstance(value, str):
            return None
        for json_type in json_types:
            converted = coerce_scalar(value, json_type)
            if converted is not None:
                return converted
        if set(json_types) <= {"integer", "number", "boolean"}:
            numeric = coerce_scalar(value, "number") is not None
            wanted = ["a bool" if json_type == "boolean" else "a whole number" if numeric else "a number"
                      for json_type in json_types]
            self.failed[path] = f"{value!r} is not " + " or ".join(dict.fromkeys(wanted))
        return None


def _set(document: Any, path: Path, value: Any) -> None:
    *parents, last = path
    for part in parents:
        document = document[part]
    document[last] = value
