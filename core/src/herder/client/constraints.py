"""Constraints checked against the node, with the operators and semantics of Nomad's scheduler.

A constraint's ``attribute`` and ``value`` are each a literal or one
``${...}`` reference to the node (``${attr.kernel.name}``,
``${node.datacenter}``, ``${meta.rack}``: :meth:`herder.client.node.Node.target`);
a reference the node does not have is "not found", which most operators
treat as not met, as ``checkConstraint`` in Nomad's ``scheduler/feasible``
does. ``distinct_hosts`` and ``distinct_property`` count allocations rather
than compare values: :mod:`herder.client.feasibility` checks them.
"""

from __future__ import annotations

from collections.abc import Callable

from herder.client.node import Node
from herder.jobspec.goregexp import RegexpError, compile_go
from herder.jobspec.goversion import satisfies
from herder.model import Constraint

DISTINCT_HOSTS = "distinct_hosts"
DISTINCT_PROPERTY = "distinct_property"
IS_SET, IS_NOT_SET = "is_set", "is_not_set"
SET_CONTAINS, SET_CONTAINS_ALL, SET_CONTAINS_ANY = "set_contains", "set_contains_all", "set_contains_any"

Target = tuple[str, bool]
"""A resolved side of a constraint: its value, and whether it was found."""


def resolve(target: str, node: Node) -> Target:
    """A constraint's side as Nomad's ``resolveTarget``: a literal unless it starts with ``${``; then
    the node's value of the reference, which must end the text (``${attr.a}b`` is not found)."""
    if not target.startswith("${"):
        return target, True
    if not target.endswith("}"):
        return "", False
    found = node.target(target[2:-1])
    return (found, True) if found is not None else ("", False)


def _order(operator: str, left: str, right: str) -> bool:
    """``left operator right`` as integers if both are, else as floats, else lexically (Nomad's ``checkOrder``)."""
    for kind in (_go_int, _go_float):
        a, b = kind(left), kind(right)
        if a is not None and b is not None:
            return _compare(operator, a, b)
    return _compare(operator, left, right)


def _compare(operator: str, left: int | float | str, right: int | float | str) -> bool:
    if operator == "<":
        return left < right  # type: ignore[operator]  # both sides are of one kind
    if operator == "<=":
        return left <= right  # type: ignore[operator]
    if operator == ">":
        return left > right  # type: ignore[operator]
    return left >= right  # type: ignore[operator]


def _go_int(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: an optional sign and decimal digits, within 64 bits."""
    body = text[1:] if text[:1] in "+-" else text
    if not body or not body.isascii() or not body.isdigit():
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _go_float(text: str) -> float | None:
    """Go's ``strconv.ParseFloat``, near enough: Python's float without its ``_`` digit separators."""
    if "_" in text or not text.strip() or text != text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _regexp(left: str, pattern: str) -> bool:
    """Whether Go's (RE2's) ``pattern`` matches anywhere in ``left``; a bad pattern matches nothing."""
    try:
        return compile_go(pattern).search(left) is not None
    except RegexpError:
        return False


def _members(text: str) -> set[str]:
    return {item.strip() for item in text.split(",")}


def _contains_all(left: str, right: str) -> bool:
    return _members(right) <= _members(left)


def _contains_any(left: str, right: str) -> bool:
    return bool(_members(right) & _members(left))


_BOTH_FOUND: dict[str, Callable[[str, str], bool]] = {
    "=": str.__eq__, "==": str.__eq__, "is": str.__eq__,
    "<": lambda a, b: _order("<", a, b), "<=": lambda a, b: _order("<=", a, b),
    ">": lambda a, b: _order(">", a, b), ">=": lambda a, b: _order(">=", a, b),
    "version": satisfies, "semver": lambda a, b: satisfies(a, b, semver=True),
    "regexp": _regexp,
    SET_CONTAINS: _contains_all, SET_CONTAINS_ALL: _contains_all, SET_CONTAINS_ANY: _contains_any,
}
"""The operators met only when both sides are found."""

OPERATORS = frozenset({*_BOTH_FOUND, "!=", "not", IS_SET, IS_NOT_SET, DISTINCT_HOSTS, DISTINCT_PROPERTY})
"""Every operator Nomad's scheduler knows; another is never met."""


def check(operator: str, left: Target, right: Target) -> bool:
    """Whether ``left operator right`` holds, as Nomad's ``checkConstraint``."""
    (left_value, left_found), (right_value, right_found) = left, right
    if operator in (DISTINCT_HOSTS, DISTINCT_PROPERTY):
        return True  # counted over allocations, not compared here
    if operator in ("!=", "not"):
        # Nomad compares the values alone, a missing side being "": it equals a literal "".
        return left_value != right_value
    if operator == IS_SET:
        return left_found
    if operator == IS_NOT_SET:
        return not left_found
    compare = _BOTH_FOUND.get(operator)
    return compare is not None and left_found and right_found and compare(left_value, right_value)


def meets(constraint: Constraint, node: Node) -> bool:
    """Whether ``node`` meets ``constraint``."""
    return check(constraint.operator, resolve(constraint.attribute, node), resolve(constraint.value, node))
