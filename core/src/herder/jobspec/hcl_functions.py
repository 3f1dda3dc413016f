"""HCL's standard functions as Nomad job files call them.

:func:`functions` gives the table :class:`~herder.jobspec.hcl_eval.Evaluator`
calls by name: strings (``format`` with Go's verbs, ``join``, ``replace``,
``regex`` and ``regexall`` with Go's RE2 (:mod:`herder.jobspec.goregexp`),
...), collections, numbers, type conversions, JSON and base64 encodings, and
``file``, which reads only what the job's :class:`~herder.jobspec.files.JobFiles`
allow, and ``pathexpand``, which only a job read on its author's side may call (as Nomad's
filesystem functions, disabled where the job is not read from a file). Every function that multiplies its input checks
:data:`~herder.jobspec.hcl_values.MAX_STRING` before it builds anything.
``try`` and ``can`` are not here: they evaluate their arguments themselves.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import uuid
from collections.abc import Callable
from typing import Any

from herder.jobspec.files import REFUSED, JobFileError, JobFiles
from herder.jobspec.goregexp import groups, matches, replace_all
from herder.jobspec.hcl_values import (
    MAX_STRING,
    EvalError,
    check_size,
    describe,
    equal,
    normal_number,
    text_size,
    to_bool,
    to_number,
    to_text,
)

MAX_WIDTH = 10_000
"""The largest width or precision of a ``format`` verb."""


def _format(spec: str, *args: Any) -> str:
    """Go's fmt verbs as HCL's format() has them: %s %d %v %q %t %f %e %g %x %X %o %b and %%."""
    remaining = list(args)
    verbs = re.compile(r"%([-+ #0]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])")

    def one(match: re.Match[str]) -> str:
        flags, width, precision, verb = match.groups()
        if verb == "%":
            return "%"
        for what, number in (("width", width), ("precision", precision)):
            if number is not None and int(number) > MAX_WIDTH:
                raise EvalError(f"{what} {int(number)} is over the limit of {MAX_WIDTH}")
        if not remaining:
            raise EvalError(f"too few arguments for the format {spec!r}")
        value = remaining.pop(0)
        if verb in ("s", "v", "t"):
            text = json.dumps(value) if isinstance(value, (list, dict)) else to_text(value)
            if precision:
                text = text[:int(precision)]
            python_spec = f"{'<' if '-' in flags else '>'}{width or ''}"
            return format(text, python_spec)
        if verb == "q":
            return json.dumps(to_text(value))
        if verb not in "dfeEgGxXob":
            raise EvalError(f"unsupported verb %{verb} in {spec!r}")
        number = to_number(value)
        align = "<" if "-" in flags else ""
        sign = "+" if "+" in flags else " " if " " in flags else ""
        zero = "0" if "0" in flags and not align else ""
        if verb == "d":
            if not isinstance(number, int):
                raise EvalError(f"%d needs a whole number, not {number!r}")
            verb = "d"
        elif verb in "xXob":
            number = int(number)
        precision_spec = f".{precision}" if precision is not None and verb in "fFeEgG" else ""
        return format(number, f"{align}{sign}{zero}{width or ''}{precision_spec}{verb}")

    text = verbs.sub(one, spec)
    if remaining:
        raise EvalError(f"too many arguments for the format {spec!r}")
    return text


def _list(value: Any, name: str = "argument") -> list[Any]:
    if not isinstance(value, list):
        raise EvalError(f"the {name} must be a list, not {describe(value)}")
    return value


def _map(value: Any, name: str = "argument") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise EvalError(f"the {name} must be a map, not {describe(value)}")
    return value


def _join(separator: Any, *lists: Any) -> str:
    items = [to_text(item) for items in lists for item in _list(items)]
    separator = to_text(separator)
    check_size(sum(map(len, items)) + len(separator) * max(len(items) - 1, 0))
    return separator.join(items)


def _lookup(mapping: Any, key: Any, *default: Any) -> Any:
    found = _map(mapping)
    if to_text(key) in found:
        return found[to_text(key)]
    if default:
        return default[0]
    raise EvalError(f"no key {key!r} and no default")


def _replace(text: Any, search: Any, replacement: Any) -> str:
    """A ``/regex/`` search is Go's (RE2); the result is checked as it is built."""
    text, search, replacement = to_text(text), to_text(search), to_text(replacement)
    if len(search) > 1 and search.startswith("/") and search.endswith("/"):
        return replace_all(search[1:-1], text, replacement, MAX_STRING)
    if search:
        check_size(len(text) + text.count(search) * (len(replacement) - len(search)))
    else:  # Python and Go put the replacement between every character and at both ends
        check_size(len(text) + (len(text) + 1) * len(replacement))
    return text.replace(search, replacement)


def _regex(pattern: Any, text: Any) -> Any:
    found = next(matches(to_text(pattern), to_text(text)), None)
    if found is None:
        raise EvalError("the pattern did not match any part of the string")
    return groups(found)


def _regexall(pattern: Any, text: Any) -> list[Any]:
    return [groups(found) for found in matches(to_text(pattern), to_text(text))]


def _indent(spaces: Any, text: Any) -> str:
    text, width = to_text(text), int(to_number(spaces))
    check_size(len(text) + text.count("\n") * width)
    return text.replace("\n", "\n" + " " * width)


def _jsonencode(value: Any) -> str:
    check_size(text_size(value))  # its strings at least: checked before encoding
    return json.dumps(value, separators=(",", ":"))


def _coalesce(*values: Any) -> Any:
    for value in values:
        if value is not None and value != "":
            return value
    raise EvalError("every argument is null or empty")


def _length(value: Any) -> int:
    if isinstance(value, (str, list, dict)):
        return len(value)
    raise EvalError(f"{describe(value)} has no length")


def _extreme(pick: Callable[..., Any]) -> Callable[..., int | float]:
    def function(*numbers: Any) -> int | float:
        if not numbers:
            raise EvalError("needs at least one number")
        return normal_number(pick(to_number(number) for number in numbers))
    return function


def _element(items: Any, index: Any) -> Any:
    items = _list(items)
    if not items:
        raise EvalError("the list is empty")
    return items[int(to_number(index)) % len(items)]


def _merge(*maps: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mapping in maps:
        if mapping is not None:
            out.update(_map(mapping))
    return out


def _distinct(items: Any) -> list[Any]:
    items = _list(items)
    return [item for n, item in enumerate(items) if item not in items[:n]]


def _flatten(items: Any) -> list[Any]:
    out: list[Any] = []
    for item in _list(items):
        out.extend(_flatten(item) if isinstance(item, list) else [item])
    return out


def _tonumber(value: Any) -> int | float | None:
    return None if value is None else to_number(value)


def _tobool(value: Any) -> bool | None:
    return None if value is None else to_bool(value)


def _sort(items: Any) -> list[str]:
    return sorted(to_text(item) for item in _list(items))


def _range(*bounds: Any) -> list[int | float]:
    numbers = [to_number(bound) for bound in bounds]
    if len(numbers) == 1:
        numbers = [0, numbers[0]]
    start, stop, step = numbers[0], numbers[1], numbers[2] if len(numbers) > 2 else 1
    if step == 0:
        raise EvalError("the step must not be zero")
    out: list[int | float] = []
    value = start
    while (value < stop if step > 0 else value > stop) and len(out) < 1024:
        out.append(value)
        value += step
    return out


def _file(files: JobFiles | None) -> Callable[[Any], str]:
    def read(name: Any) -> str:
        if files is None:
            raise EvalError(REFUSED)
        try:
            return files.read(to_text(name))
        except JobFileError as exc:
            raise EvalError(str(exc)) from None
    return read


def _pathexpand(files: JobFiles | None) -> Callable[[Any], str]:
    """go-cty-funcs' ``pathexpand``: a leading ``~`` is the home directory of the user reading the job."""
    def expand(value: Any) -> str:
        if files is None:
            raise EvalError("pathexpand() is not available to jobs submitted to the agent: use `herder job run`, "
                            "which reads the job on your side")
        path = to_text(value)
        if not path.startswith("~"):
            return path
        if len(path) > 1 and path[1] not in "/\\":
            raise EvalError("cannot expand user-specific home dir")
        return os.path.expanduser("~") + path[1:]
    return expand


_UUID_NAMESPACES = {"dns": uuid.NAMESPACE_DNS, "url": uuid.NAMESPACE_URL, "oid": uuid.NAMESPACE_OID,
                    "x500": uuid.NAMESPACE_X500}


def _uuidv5(namespace: Any, name: Any) -> str:
    """go-cty-funcs' ``uuidv5``: a name-based (SHA-1) UUID in a namespace named ``dns``, ``url``, ``oid`` or
    ``x500``, or given as a UUID."""
    given = to_text(namespace)
    space = _UUID_NAMESPACES.get(given)
    if space is None:
        try:
            space = uuid.UUID(given)
        except ValueError as exc:
            raise EvalError(f"uuidv5() doesn't support namespace {given} ({exc})") from None
    return str(uuid.uuid5(space, to_text(name)))


def functions(files: JobFiles | None) -> dict[str, Callable[..., Any]]:
    def text(function: Callable[[str], Any]) -> Callable[[Any], Any]:
        return lambda value: function(to_text(value))

    return {
        "format": lambda spec, *args: _format(to_text(spec), *args),
        "formatlist": lambda spec, *lists: [_format(to_text(spec), *row) for row in zip(*map(_list, lists),
                                                                                       strict=True)],
        "join": _join,
        "split": lambda separator, value: to_text(value).split(to_text(separator)),
        "lower": text(str.lower),
        "upper": text(str.upper),
        "title": text(str.title),
        "trimspace": text(str.strip),
        "chomp": text(lambda value: value.rstrip("\r\n")),
        "trim": lambda value, chars: to_text(value).strip(to_text(chars)),
        "trimprefix": lambda value, prefix: to_text(value).removeprefix(to_text(prefix)),
        "trimsuffix": lambda value, suffix: to_text(value).removesuffix(to_text(suffix)),
        "startswith": lambda value, prefix: to_text(value).startswith(to_text(prefix)),
        "endswith": lambda value, suffix: to_text(value).endswith(to_text(suffix)),
        "substr": lambda value, offset, length: to_text(value)[int(to_number(offset)):][
            :None if to_number(length) < 0 else int(to_number(length))],
        "indent": _indent,
        "replace": _replace,
        "regex": _regex,
        "regexall": _regexall,
        "concat": lambda *lists: [item for items in lists for item in _list(items)],
        "merge": _merge,
        "lookup": _lookup,
        "file": _file(files),
        "pathexpand": _pathexpand(files),
        "uuidv5": _uuidv5,
        "jsonencode": _jsonencode,
        "jsondecode": lambda value: json.loads(to_text(value)),
        "base64encode": lambda value: base64.b64encode(to_text(value).encode()).decode(),
        "base64decode": lambda value: base64.b64decode(to_text(value)).decode(),
        "coalesce": _coalesce,
        "compact": lambda items: [item for item in _list(items) if item not in (None, "")],
        "length": _length,
        "tostring": lambda value: None if value is None else to_text(value),
        "tonumber": _tonumber,
        "tobool": _tobool,
        "tolist": lambda value: list(_list(value)),
        "toset": _distinct,
        "tomap": lambda value: dict(_map(value)),
        "min": _extreme(min),
        "max": _extreme(max),
        "abs": lambda value: abs(to_number(value)),
        "ceil": lambda value: math.ceil(to_number(value)),
        "floor": lambda value: math.floor(to_number(value)),
        "keys": lambda value: sorted(_map(value)),
        "values": lambda value: [_map(value)[key] for key in sorted(value)],
        "element": _element,
        "contains": lambda items, value: any(equal(item, value) for item in _list(items)),
        "index": lambda items, value: next(n for n, item in enumerate(_list(items)) if equal(item, value)),
        "distinct": _distinct,
        "flatten": _flatten,
        "reverse": lambda items: list(reversed(_list(items))),
        "sort": _sort,
        "range": _range,
        "zipmap": lambda names, values: dict(zip(map(to_text, _list(names)), _list(values), strict=True)),
        "sum": lambda items: normal_number(sum(to_number(item) for item in _list(items))),
    }
