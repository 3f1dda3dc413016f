"""HCL's values as the evaluator and its functions see them.

:class:`EvalError`, the error of every expression that cannot be evaluated;
the conversions HCL makes between strings, numbers and bools
(:func:`to_text`, :func:`to_number`, :func:`to_bool`), its equality, the
words an error uses for a kind of value (:func:`describe`), and the limit
:data:`MAX_STRING` on the strings an expression may build.
"""

from __future__ import annotations

import re
from typing import Any

MAX_STRING = 1 << 20
"""The longest string a function may produce (characters): checked before the
functions that multiply their input build anything, and on every result."""


class EvalError(Exception):
    """An expression cannot be evaluated; the message says why."""


def describe(value: Any) -> str:
    """Words for the kind of ``value``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "a map"


def to_text(value: Any, purpose: str = "be a string") -> str:
    """HCL's conversion of a value to a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _number_text(value)
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    raise EvalError(f"{describe(value)} cannot {purpose}")


def _number_text(value: int | float) -> str:
    value = normal_number(value)
    return str(value) if isinstance(value, int) else repr(value)


def normal_number(value: int | float) -> int | float:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def to_number(value: Any) -> int | float:
    if isinstance(value, bool) or value is None:
        raise EvalError(f"{describe(value)} is not a number")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return normal_number(float(value)) if re.search(r"[.eE]", value) else int(value)
        except ValueError:
            pass
    raise EvalError(f"{describe(value)} ({value!r}) is not a number")


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise EvalError(f"{describe(value)} is not a bool")


def equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    return bool(left == right)



def text_size(value: Any) -> int:
    """The characters of the strings in ``value``, counted until they pass :data:`MAX_STRING`."""
    pending, size = [value], 0
    while pending and size <= MAX_STRING:
        item = pending.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            size += sum(map(len, item))
            pending.extend(item.values())
        elif isinstance(item, list):
            size += len(item)
            pending.extend(item)
    return size


def check_size(size: int) -> None:
    if size > MAX_STRING:
        raise EvalError(f"the result would be longer than {MAX_STRING} characters")

