"""``constraint`` blocks: their shorthand keys read as Nomad's jobspec reads them, and checked as
Nomad's ``Constraint.Validate`` checks them.

``constraint { attribute = "${attr.kernel.version}" version = ">= 4.0" }`` is
operator ``version`` with that value; likewise ``semver``, ``regexp`` and the
``set_contains`` family (value), ``is_set`` / ``is_not_set`` (attribute),
``distinct_property`` (attribute; ``value`` the allowed count) and
``distinct_hosts = true``. Without an operator, it is ``=``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from herder.jobspec.goregexp import RegexpError, compile_go
from herder.jobspec.goversion import parse_constraints
from herder.jobspec.paths import Path
from herder.model import Constraint

_VALUE_SHORTHANDS = ("version", "semver", "regexp", "set_contains", "set_contains_all", "set_contains_any")
_ATTRIBUTE_SHORTHANDS = ("is_set", "is_not_set", "distinct_property")
_ORDERED = ("=", "==", "is", "!=", "not", "<", "<=", ">", ">=")
_SETS = ("set_contains", "set_contains_all", "set_contains_any")

Problem = Callable[[Path, str], None]


def gather_constraint_blocks(document: Any) -> None:
    """Move a YAML or JSON document's ``constraint`` (Nomad's name: one map or a list of them) to
    ``constraints`` at the job, group and task level, in place, as HCL's ``constraint`` blocks go;
    both at once is left for the schema to refuse."""
    job = document.get("job") if isinstance(document, dict) else None
    holders: list[Any] = [job]
    for group in _maps(job, "groups"):
        holders += [group, *_maps(group, "tasks")]
    for holder in holders:
        if isinstance(holder, dict) and "constraint" in holder and "constraints" not in holder:
            blocks = holder.pop("constraint")
            holder["constraints"] = blocks if isinstance(blocks, list) else [blocks]


def _maps(parent: Any, key: str) -> list[Any]:
    items = parent.get(key) if isinstance(parent, dict) else None
    return items if isinstance(items, list) else []


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def build_constraints(specs: list[dict[str, Any]], path: Path, problem: Problem) -> tuple[Constraint, ...]:
    """The constraints of a job, group or task (``specs`` passed the job schema); each invalid one
    reported through ``problem`` at its path."""
    built: list[Constraint] = []
    for index, spec in enumerate(specs):
        constraint = _constraint(spec)
        for message in _invalid(constraint):
            problem((*path, index), message)
        built.append(constraint)
    return tuple(built)


def _constraint(spec: dict[str, Any]) -> Constraint:
    attribute, operator, value = _text(spec.get("attribute")), _text(spec.get("operator")), _text(spec.get("value"))
    for key in _VALUE_SHORTHANDS:
        if spec.get(key):
            operator, value = key, _text(spec[key])
    for key in _ATTRIBUTE_SHORTHANDS:
        if spec.get(key):
            operator, attribute = key, _text(spec[key])
    if "distinct_hosts" in spec:
        operator, value = "distinct_hosts", _text(spec["distinct_hosts"])
    return Constraint(attribute=attribute, operator=operator or "=", value=value)


def _invalid(constraint: Constraint) -> list[str]:
    """What Nomad's ``Constraint.Validate`` refuses in ``constraint``."""
    operator, value = constraint.operator, constraint.value
    problems: list[str] = []
    if operator in _SETS and not value:
        problems.append("a set_contains constraint needs a value")
    elif operator == "regexp":
        try:
            compile_go(value)
        except RegexpError as exc:
            problems.append(f"the regular expression does not compile: {exc}")
    elif operator in ("version", "semver") and parse_constraints(value, semver=operator == "semver") is None:
        problems.append(f"{operator} constraint {value!r} is invalid")
    elif operator == "distinct_property" and value and not (value.isascii() and value.isdigit() and int(value) >= 1):
        problems.append(f"distinct_property's value is the allowed count, a whole number of 1 or more, not {value!r}")
    elif operator in ("is_set", "is_not_set") and value:
        problems.append(f"operator {operator!r} takes no value")
    elif operator in _ORDERED and not value:
        problems.append(f"operator {operator!r} needs a value")
    if operator != "distinct_hosts" and not constraint.attribute:
        problems.append(f"operator {operator!r} needs an attribute")
    return problems
