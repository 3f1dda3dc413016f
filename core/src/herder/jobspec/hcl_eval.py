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
starts. The functions it calls are :mod:`herder.jobspec.hcl_functions`'s;
the values it works on, their conversions and the errors it raises, are
:mod:`herder.jobspec.hcl_values`'s. :func:`convert` converts a value to a
type as a ``variable`` block declares it.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from herder import deadline
from herder.jobspec.files import JobFiles
from herder.jobspec.goregexp import RegexpError
from herder.jobspec.hcl_functions import functions
from herder.jobspec.hcl_values import (
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

MAX_STEPS = 1_000_000
"""The most expression nodes one job's evaluation may visit (``for`` loops included);
each looks at the job's deadline (:mod:`herder.deadline`) too: a step may be a call over a megabyte."""


class HclSyntaxError(Exception):
    """The text is not valid HCL, or uses a construct herder does not evaluate."""


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
        self.functions = functions(files)
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
        check_size(sum(map(len, out)))
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
            return not to_bool(value) if node.op == "!" else -to_number(value)
        if isinstance(node, Binary):
            return self.binary(node, scope)
        if isinstance(node, Conditional):
            chosen = node.then if to_bool(self.evaluate(node.condition, scope)) else node.otherwise
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
            check_size(text_size(result))
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
            if to_bool(left) == (node.op == "||"):
                return to_bool(left)
            return to_bool(self.evaluate(node.right, scope))
        right = self.evaluate(node.right, scope)
        if node.op == "==":
            return equal(left, right)
        if node.op == "!=":
            return not equal(left, right)
        a, b = to_number(left), to_number(right)
        if node.op in (">", ">=", "<", "<="):
            return {">": a > b, ">=": a >= b, "<": a < b, "<=": a <= b}[node.op]
        if node.op in ("/", "%") and b == 0:
            raise EvalError("division by zero")
        result = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                  "%": lambda: math.fmod(a, b)}[node.op]()
        return normal_number(result)

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
            if node.condition is not None and not to_bool(self.evaluate(node.condition, inner)):
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
        index = to_number(key)
        if not isinstance(index, int) or not 0 <= index < len(target):
            raise EvalError(f"index {key!r} is out of range (the list has {len(target)} items)")
        return target[index]
    raise EvalError(f"cannot look up {key!r} in {describe(target)}")


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
            return to_number(value)
        if name == "bool":
            return to_bool(value)
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
