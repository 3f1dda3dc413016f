"""HCL2 expressions as Nomad job files use them: the syntax tree and its evaluation.

The job file reader (:mod:`herder.jobspec.hcl`) hands over every attribute
value either as plain data or as an expression read from python-hcl2's parse
tree into the nodes below (:mod:`herder.jobspec.hcl_tree`); the strings of
JSON and YAML job files are *templates* (literal text, ``${EXPR}``
interpolations, ``$${`` for a literal ``${``) read the same way.

:class:`Evaluator` evaluates them against ``var`` and ``local``: literals,
lists, objects, templates, references with attribute and index access,
function calls (with ``...`` expansion), ``for`` expressions, unary, binary
and conditional operators. An interpolation that is nothing but a reference
to another name (``${NOMAD_PORT_http}``, ``${attr.kernel.name}``,
``${meta.team}``) is left as written for the runner to resolve when the task
starts.
"""

from __future__ import annotations

import base64
import inspect
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from herder import deadline
from herder.jobspec.files import REFUSED, JobFileError, JobFiles
from herder.jobspec.goregexp import RegexpError, groups, matches, replace_all

MAX_STRING = 1 << 20
"""The longest string a function may produce (characters): checked before the
functions that multiply their input build anything, and on every result."""
MAX_WIDTH = 10_000
"""The largest width or precision of a ``format`` verb."""
MAX_STEPS = 1_000_000
"""The most expression nodes one job's evaluation may visit (``for`` loops included);
each looks at the job's deadline (:mod:`herder.deadline`) too: a step may be a call over a megabyte."""


class HclSyntaxError(Exception):
    """The text is not valid HCL, or uses a construct herder does not evaluate."""


class EvalError(Exception):
    """An expression cannot be evaluated; the message says why."""


class Exhausted(EvalError):
    """The evaluation went over :data:`MAX_STEPS`; ``try`` and ``can`` do not hide it."""


class UnknownName(EvalError):
    """A reference to a name that is neither ``var``, ``local`` nor in scope."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown name {name!r} (only var.NAME and local.NAME are known when the file is read; "
                         f"runtime values such as ${{NOMAD_PORT_http}} can only be interpolated on their own)")
        self.name = name


# ---------------------------------------------------------------- syntax tree


@dataclass(frozen=True)
class Literal:
    value: Any


@dataclass(frozen=True)
class Interpolation:
    expression: Node
    source: str


@dataclass(frozen=True)
class Template:
    """Literal text and interpolations; a lone interpolation keeps its value's type."""

    parts: tuple[str | Interpolation, ...]


@dataclass(frozen=True)
class Reference:
    name: str


@dataclass(frozen=True)
class GetAttr:
    target: Node
    name: str


@dataclass(frozen=True)
class Index:
    target: Node
    key: Node


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Node, ...]
    expand_last: bool


@dataclass(frozen=True)
class ListExpr:
    items: tuple[Node, ...]


@dataclass(frozen=True)
class ObjectExpr:
    items: tuple[tuple[Node, Node], ...]


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Node


@dataclass(frozen=True)
class Binary:
    op: str
    left: Node
    right: Node


@dataclass(frozen=True)
class Conditional:
    condition: Node
    then: Node
    otherwise: Node


@dataclass(frozen=True)
class ForExpr:
    key_name: str | None
    value_name: str
    collection: Node
    key: Node | None  # set for the object form {for ... : KEY => VALUE}
    value: Node
    condition: Node | None
    group: bool


Node = (Literal | Template | Reference | GetAttr | Index | Call | ListExpr | ObjectExpr | Unary | Binary
        | Conditional | ForExpr)

# ---------------------------------------------------------------- evaluation

class Evaluator:
    """Evaluates expressions against variables and locals.

    ``lookup(root, name)`` gives the value of ``var.NAME`` / ``local.NAME``
    (raising :class:`EvalError` with a message when it has none); ``files``
    is what ``file()`` may read (None: nothing, as for text sent to the agent).
    """

    def __init__(self, lookup: Callable[[str, str], Any], files: JobFiles | None) -> None:
        self.lookup = lookup
        self.functions = _functions(files)
        self.steps = 0

    def template(self, template: Template, scope: Mapping[str, Any]) -> tuple[Any, bool]:
        parts = template.parts
        if len(parts) == 1 and isinstance(parts[0], Interpolation):
            alone = parts[0]
            if _runtime_reference(alone.expression, scope):
                return "${" + alone.source + "}", False
            return self.evaluate(alone.expression, scope), True
        out: list[str] = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif _runtime_reference(part.expression, scope):
                out.append("${" + part.source + "}")
            else:
                value = self.evaluate(part.expression, scope)
                if isinstance(value, (list, dict)):
                    raise EvalError(f"{part.source} is {describe(value)} and cannot be part of a string")
                out.append(to_text(value))
        _check_size(sum(map(len, out)))
        return "".join(out), False

    def evaluate(self, node: Node, scope: Mapping[str, Any]) -> Any:
        """The value of ``node``; names in ``scope`` are the variables of enclosing ``for`` expressions."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Exhausted(f"the job's expressions take more than {MAX_STEPS} steps to evaluate")
        deadline.check()  # every step: one may be a call over a megabyte, repeated by a loop
        if isinstance(node, Literal):
            return node.value
        if isinstance(node, Template):
            return self.template(node, scope)[0]
        if isinstance(node, (Reference, GetAttr, Index)):
            return self.traversal(node, scope)
        if isinstance(node, Call):
            return self.call(node, scope)
        if isinstance(node, ListExpr):
            return [self.evaluate(item, scope) for item in node.items]
        if isinstance(node, ObjectExpr):
            return {to_text(self.evaluate(key, scope), "be an object key"): self.evaluate(value, scope)
                    for key, value in node.items}
        if isinstance(node, Unary):
            value = self.evaluate(node.operand, scope)
            return not _bool(value) if node.op == "!" else -_number(value)
        if isinstance(node, Binary):
            return self.binary(node, scope)
        if isinstance(node, Conditional):
            chosen = node.then if _bool(self.evaluate(node.condition, scope)) else node.otherwise
            return self.evaluate(chosen, scope)
        return self.for_expression(node, scope)

    def traversal(self, node: Reference | GetAttr | Index, scope: Mapping[str, Any]) -> Any:
        if isinstance(node, Reference):
            if node.name in scope:
                return scope[node.name]
            if node.name in ("var", "local"):
                raise EvalError(f"{node.name!r} must be followed by .NAME")
            raise UnknownName(node.name)
        if isinstance(node.target, Reference) and node.target.name in ("var", "local") \
                and node.target.name not in scope:
            name = node.name if isinstance(node, GetAttr) else self.evaluate(node.key, scope)
            return self.lookup(node.target.name, str(name))
        target = self.evaluate(node.target, scope)
        key = node.name if isinstance(node, GetAttr) else self.evaluate(node.key, scope)
        return _get(target, key)

    def call(self, node: Call, scope: Mapping[str, Any]) -> Any:
        if node.name in ("try", "can"):
            return self.try_call(node, scope)
        function = self.functions.get(node.name)
        if function is None:
            raise EvalError(f"unknown function {node.name!r}")
        args = [self.evaluate(arg, scope) for arg in node.args]
        if node.expand_last:
            if not args or not isinstance(args[-1], list):
                raise EvalError(f"{node.name}(): the argument before '...' must be a list")
            args = args[:-1] + args[-1]
        try:
            inspect.signature(function).bind(*args)
        except TypeError:
            raise EvalError(f"{node.name}(): wrong number of arguments ({len(args)})") from None
        try:
            result = function(*args)
            _check_size(_text_size(result))
            return result
        except (EvalError, RegexpError) as exc:
            message = str(exc)
            raise EvalError(message if message.startswith(f"{node.name}()") else f"{node.name}(): {message}") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
            raise EvalError(f"{node.name}(): invalid arguments ({exc})") from None

    def try_call(self, node: Call, scope: Mapping[str, Any]) -> Any:
        if node.name == "can" and len(node.args) != 1:
            raise EvalError("can(): takes one argument")
        for arg in node.args:
            try:
                value = self.evaluate(arg, scope)
            except (UnknownName, Exhausted):
                raise
            except EvalError:
                continue
            return True if node.name == "can" else value
        if node.name == "can":
            return False
        raise EvalError("try(): no argument could be evaluated")

    def binary(self, node: Binary, scope: Mapping[str, Any]) -> Any:
        left = self.evaluate(node.left, scope)
        if node.op in ("&&", "||"):
            if _bool(left) == (node.op == "||"):
                return _bool(left)
            return _bool(self.evaluate(node.right, scope))
        right = self.evaluate(node.right, scope)
        if node.op == "==":
            return _equal(left, right)
        if node.op == "!=":
            return not _equal(left, right)
        a, b = _number(left), _number(right)
        if node.op in (">", ">=", "<", "<="):
            return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[node.op]
        if node.op in ("/", "%") and b == 0:
            raise EvalError("division by zero")
        result = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                  "%": lambda: math.fmod(a, b)}[node.op]()
        return _normal_number(result)

    def for_expression(self, node: ForExpr, scope: Mapping[str, Any]) -> Any:
        collection = self.evaluate(node.collection, scope)
        if isinstance(collection, dict):
            pairs = list(collection.items())
        elif isinstance(collection, list):
            pairs = list(enumerate(collection))
        else:
            raise EvalError("a 'for' expression needs a list or a map")
        items: list[Any] = []
        keys: list[str] = []
        for key, value in pairs:
            inner = {**scope, node.value_name: value}
            if node.key_name:
                inner[node.key_name] = key
            if node.condition is not None and not _bool(self.evaluate(node.condition, inner)):
                continue
            if node.key is not None:
                keys.append(to_text(self.evaluate(node.key, inner), "be an object key"))
            items.append(self.evaluate(node.value, inner))
        if node.key is None:
            return items
        out: dict[str, Any] = {}
        for key, value in zip(keys, items, strict=True):
            if node.group:
                out.setdefault(key, []).append(value)
            elif key in out:
                raise EvalError(f"a 'for' expression gives the key {key!r} twice (add '...' to group them)")
            else:
                out[key] = value
        return out


def _runtime_reference(node: Node, scope: Mapping[str, Any]) -> bool:
    """Whether ``node`` is only a reference to a name resolved at runtime (``NOMAD_X``, ``attr.a.b``)."""
    while isinstance(node, (GetAttr, Index)):
        if isinstance(node, Index) and not isinstance(node.key, Literal):
            return False
        node = node.target
    return isinstance(node, Reference) and node.name not in ("var", "local") and node.name not in scope


def _get(target: Any, key: Any) -> Any:
    if isinstance(target, dict):
        if str(key) not in target:
            raise EvalError(f"no key {key!r} (the keys are {', '.join(sorted(target)) or 'none'})")
        return target[str(key)]
    if isinstance(target, list):
        index = _number(key)
        if not isinstance(index, int) or not 0 <= index < len(target):
            raise EvalError(f"index {key!r} is out of range (the list has {len(target)} items)")
        return target[index]
    raise EvalError(f"cannot look up {key!r} in {describe(target)}")


# ---------------------------------------------------------------- values


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
    value = _normal_number(value)
    return str(value) if isinstance(value, int) else repr(value)


def _normal_number(value: int | float) -> int | float:
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def _number(value: Any) -> int | float:
    if isinstance(value, bool) or value is None:
        raise EvalError(f"{describe(value)} is not a number")
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return _normal_number(float(value)) if re.search(r"[.eE]", value) else int(value)
        except ValueError:
            pass
    raise EvalError(f"{describe(value)} ({value!r}) is not a number")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise EvalError(f"{describe(value)} is not a bool")


def _equal(left: Any, right: Any) -> bool:
    if isinstance(left, bool) != isinstance(right, bool):
        return False
    return bool(left == right)


# ---------------------------------------------------------------- types


def convert(value: Any, kind: Node) -> Any:
    """``value`` converted to the HCL type ``kind`` (``string``, ``list(number)``, ...), as HCL converts."""
    if isinstance(kind, Reference):
        name = kind.name
        if name == "any" or value is None:
            return value
        if name == "string":
            if isinstance(value, (list, dict)):
                raise EvalError(f"{describe(value)} is not a string")
            return to_text(value)
        if name == "number":
            return _number(value)
        if name == "bool":
            return _bool(value)
    elif isinstance(kind, Call) and len(kind.args) == 1:
        element = kind.args[0]
        if kind.name in ("list", "set") and isinstance(value, list):
            items = [convert(item, element) for item in value]
            return [item for n, item in enumerate(items) if item not in items[:n]] if kind.name == "set" else items
        if kind.name == "map" and isinstance(value, dict):
            return {key: convert(item, element) for key, item in value.items()}
        if kind.name == "object" and isinstance(value, dict) and isinstance(element, ObjectExpr):
            return _object(value, element)
        if kind.name == "tuple" and isinstance(value, list) and isinstance(element, ListExpr):
            if len(value) != len(element.items):
                raise EvalError(f"needs {len(element.items)} items, not {len(value)}")
            return [convert(item, item_kind) for item, item_kind in zip(value, element.items, strict=True)]
        if kind.name in ("list", "set", "map", "object", "tuple"):
            raise EvalError(f"{describe(value)} is not a {kind.name}")
    raise EvalError("is not a type (use string, number, bool, any, list(T), set(T), map(T), object({...}), "
                    "tuple([...]))")


def _object(value: dict[str, Any], kind: ObjectExpr) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key_node, item_kind in kind.items:
        key = str(key_node.value) if isinstance(key_node, Literal) else ""
        if key not in value:
            raise EvalError(f"the attribute {key!r} is required")
        out[key] = convert(value[key], item_kind)
    return out


# ---------------------------------------------------------------- functions


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
        number = _number(value)
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
    _check_size(sum(map(len, items)) + len(separator) * max(len(items) - 1, 0))
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
        _check_size(len(text) + text.count(search) * (len(replacement) - len(search)))
    else:  # Python and Go put the replacement between every character and at both ends
        _check_size(len(text) + (len(text) + 1) * len(replacement))
    return text.replace(search, replacement)


def _regex(pattern: Any, text: Any) -> Any:
    found = next(matches(to_text(pattern), to_text(text)), None)
    if found is None:
        raise EvalError("the pattern did not match any part of the string")
    return groups(found)


def _regexall(pattern: Any, text: Any) -> list[Any]:
    return [groups(found) for found in matches(to_text(pattern), to_text(text))]


def _indent(spaces: Any, text: Any) -> str:
    text, width = to_text(text), int(_number(spaces))
    _check_size(len(text) + text.count("\n") * width)
    return text.replace("\n", "\n" + " " * width)


def _jsonencode(value: Any) -> str:
    _check_size(_text_size(value))  # its strings at least: checked before encoding
    return json.dumps(value, separators=(",", ":"))


def _text_size(value: Any) -> int:
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


def _check_size(size: int) -> None:
    if size > MAX_STRING:
        raise EvalError(f"the result would be longer than {MAX_STRING} characters")


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
        return _normal_number(pick(_number(number) for number in numbers))
    return function


def _element(items: Any, index: Any) -> Any:
    items = _list(items)
    if not items:
        raise EvalError("the list is empty")
    return items[int(_number(index)) % len(items)]


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
    return None if value is None else _number(value)


def _tobool(value: Any) -> bool | None:
    return None if value is None else _bool(value)


def _sort(items: Any) -> list[str]:
    return sorted(to_text(item) for item in _list(items))


def _range(*bounds: Any) -> list[int | float]:
    numbers = [_number(bound) for bound in bounds]
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


def _functions(files: JobFiles | None) -> dict[str, Callable[..., Any]]:
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
        "substr": lambda value, offset, length: to_text(value)[int(_number(offset)):][
            :None if _number(length) < 0 else int(_number(length))],
        "indent": _indent,
        "replace": _replace,
        "regex": _regex,
        "regexall": _regexall,
        "concat": lambda *lists: [item for items in lists for item in _list(items)],
        "merge": _merge,
        "lookup": _lookup,
        "file": _file(files),
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
        "abs": lambda value: abs(_number(value)),
        "ceil": lambda value: math.ceil(_number(value)),
        "floor": lambda value: math.floor(_number(value)),
        "keys": lambda value: sorted(_map(value)),
        "values": lambda value: [_map(value)[key] for key in sorted(value)],
        "element": _element,
        "contains": lambda items, value: any(_equal(item, value) for item in _list(items)),
        "index": lambda items, value: next(n for n, item in enumerate(_list(items)) if _equal(item, value)),
        "distinct": _distinct,
        "flatten": _flatten,
        "reverse": lambda items: list(reversed(_list(items))),
        "sort": _sort,
        "range": _range,
        "zipmap": lambda names, values: dict(zip(map(to_text, _list(names)), _list(values), strict=True)),
        "sum": lambda items: _normal_number(sum(_number(item) for item in _list(items))),
    }
