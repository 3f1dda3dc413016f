"""Input variables and locals, as Nomad's HCL2 jobspec has them.

A job file declares variables at the top level (HCL: ``variable "NAME" {
type = ..., default = ..., description = ..., sensitive = ..., validation {
condition = ..., error_message = ... } }``; JSON and YAML: ``variables:
{NAME: {default: ...}}``) and local values (HCL: ``locals { NAME = EXPR }``,
as many blocks as wanted; JSON and YAML: ``locals: {NAME: EXPR}``). Every
string of the job is a template (see :mod:`herder.jobspec.hcl_eval`) and is
evaluated here: ``${var.NAME}``, ``${local.NAME}`` and the HCL functions.
Values given to :func:`herder.jobspec.load_job` (``--var``) override
defaults and are typed by the declaration's ``type``. ``$${`` writes ``${``,
and interpolations of runtime names (``${NOMAD_PORT_http}``) are left as
written, as in Nomad.

A string that is nothing but one interpolation takes its value as it is, so
``count = var.n`` gives a number. A string value put in such a place is
remembered: where the job schema wants a number or a boolean there, validation
converts it (as HCL's type conversion would).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from herder.jobspec.files import JobFiles
from herder.jobspec.hcl import DynamicBlock
from herder.jobspec.hcl_eval import Call, Evaluator, HclSyntaxError, Node, Reference, convert
from herder.jobspec.hcl_tree import Expression, as_text, parse_template, parse_type
from herder.jobspec.hcl_values import EvalError, describe
from herder.jobspec.paths import Path, render_path


class _Reported(EvalError):
    """An error already reported where it arose (in a local), not to be reported again."""


def apply_variables(
    document: dict[str, Any], given: Mapping[str, str] | None, files: JobFiles | None
) -> tuple[list[tuple[Path, str]], set[str]]:
    """Evaluate the templates of ``document["job"]`` in place.

    ``files`` is what ``file()`` may read (None: nothing). Returns the problems found and the rendered paths where
    a whole string was replaced by a string value (the places validation may
    convert).
    """
    scope = _Scope(document.get("variables"), document.get("locals"), files)
    for name, text in (given or {}).items():
        scope.give(name, text)
    scope.validate_declarations()
    if "job" in document:
        document["job"] = scope.apply(document["job"], ("job",))
    for key in ("variables", "locals"):
        if key in document:
            document[key] = as_text(document[key])
    return scope.problems, scope.coercible


class _Scope:
    def __init__(self, declared: Any, local_values: Any, files: JobFiles | None) -> None:
        self.declarations: dict[str, Any] = declared if isinstance(declared, dict) else {}
        self.locals: dict[str, Any] = local_values if isinstance(local_values, dict) else {}
        self.values: dict[str, Any] = {}
        self.types: dict[str, Node] = {}
        self.local_values: dict[str, Any] = {}
        self.local_state: dict[str, str] = {}  # "evaluating" or "failed"
        self.problems: list[tuple[Path, str]] = []
        self.coercible: set[str] = set()
        self.evaluator = Evaluator(self.lookup, files)
        for name, declaration in self.declarations.items():
            if isinstance(declaration, dict):
                self.declare(name, declaration)

    def declare(self, name: str, declaration: dict[str, Any]) -> None:
        if isinstance(declaration.get("type"), (str, Expression)):
            try:
                self.types[name] = parse_type(declaration["type"])
            except HclSyntaxError as exc:
                self.problems.append((("variables", name, "type"), f"is not a type: {exc}"))
        if declaration.get("default") is None:
            return
        try:
            self.values[name] = self.typed(name, self.constant(declaration["default"]))
        except EvalError as exc:
            self.problems.append((("variables", name, "default"), f"the default {_quoted(declaration['default'])} "
                                                                  f"does not match the type: {exc}"))

    def constant(self, value: Any) -> Any:
        """A default's value: an expression there may use no variable, local or function."""
        if isinstance(value, Expression):
            return Evaluator(_no_names, None).template(value.template, {})[0]
        return value

    def typed(self, name: str, value: Any) -> Any:
        kind = self.types.get(name)
        return value if kind is None else convert(value, kind)

    def give(self, name: str, text: str) -> None:
        if name not in self.declarations:
            self.problems.append(((), f"variable {name!r} is given a value but the job file does not declare it"))
            return
        try:
            self.values[name] = self.typed(name, _from_text(text, self.types.get(name)))
        except EvalError as exc:
            self.problems.append((("variables", name), f"the value given, {text!r}, {exc}"))

    def validate_declarations(self) -> None:
        """Run each variable's ``validation`` blocks against its value."""
        for name, declaration in self.declarations.items():
            rules = declaration.get("validation") if isinstance(declaration, dict) else None
            if name not in self.values or rules is None:
                continue
            for index, rule in enumerate(rules if isinstance(rules, list) else [rules]):
                path: Path = ("variables", name, "validation") if isinstance(rules, dict) else \
                    ("variables", name, "validation", index)
                if isinstance(rule, dict) and "condition" in rule:
                    self.check_rule(name, rule, path)

    def check_rule(self, name: str, rule: dict[str, Any], path: Path) -> None:
        condition = rule["condition"]
        try:
            passed = self.value_of(condition, {})[0] if isinstance(condition, (str, Expression)) else condition
        except EvalError as exc:
            self.problems.append(((*path, "condition"), str(exc)))
            return
        if not isinstance(passed, bool):
            self.problems.append(((*path, "condition"), f"must be true or false, not {describe(passed)}"))
        elif not passed:
            message = rule.get("error_message")
            self.problems.append((("variables", name), str(message) if message else "the value is not valid"))

    def lookup(self, root: str, name: str) -> Any:
        if root == "var":
            if name in self.values:
                return self.values[name]
            if name in self.declarations:
                raise EvalError(f"variable {name!r} has no value (give one with --var {name}=VALUE)")
            raise EvalError(f"variable {name!r} is not declared")
        if name in self.local_values:
            return self.local_values[name]
        if name not in self.locals:
            raise EvalError(f"local {name!r} is not defined (add it to a locals block)")
        state = self.local_state.get(name)
        if state == "evaluating":
            raise EvalError(f"local {name!r} refers to itself")
        if state == "failed":
            raise _Reported(name)
        self.local_state[name] = "evaluating"
        before = len(self.problems)
        value = self.apply(self.locals[name], ("locals", name))
        if len(self.problems) > before:
            self.local_state[name] = "failed"
            raise _Reported(name)
        del self.local_state[name]
        self.local_values[name] = value
        return value

    def apply(self, value: Any, path: Path, scope: Mapping[str, Any] | None = None) -> Any:
        """``value`` with its templates evaluated and its dynamic blocks expanded; ``scope``: the
        iterators of the dynamic blocks around it."""
        scope = scope or {}
        if isinstance(value, dict):
            return {key: self.apply(item, (*path, key), scope) for key, item in value.items()}
        if isinstance(value, list):
            out: list[Any] = []
            for item in value:
                if isinstance(item, DynamicBlock):
                    out.extend(self.expand(item, (*path, len(out)), scope))
                else:
                    out.append(self.apply(item, (*path, len(out)), scope))
            return out
        if isinstance(value, (str, Expression)):
            return self.apply_text(value, path, scope)
        return value

    def expand(self, block: DynamicBlock, path: Path, scope: Mapping[str, Any]) -> list[Any]:
        """The maps a dynamic block makes, one per element of its ``for_each``."""
        collection = self.apply(block.for_each, (*path, "for_each"), scope)
        if isinstance(collection, dict):
            elements = sorted(collection.items())  # HCL iterates a map in the order of its keys
        elif isinstance(collection, list):
            elements = list(enumerate(collection))
        else:
            if not isinstance(collection, str) or "${" not in collection:  # else reported already
                self.problems.append(((*path, "for_each"), f"must be a list or a map, not {describe(collection)}"))
            return []
        out: list[Any] = []
        for key, element in elements:
            here: Path = (*path[:-1], path[-1] + len(out)) if isinstance(path[-1], int) else path
            inner = {**scope, block.iterator: {"key": key, "value": element}}
            labels = self.apply(block.labels, (*here, "labels"), inner)
            content = self.apply(block.content, here, inner)
            if not isinstance(labels, list) or not all(isinstance(label, (str, int, float)) for label in labels):
                self.problems.append(((*here, "labels"), "must be a list of strings"))
            elif block.label_key is not None and len(labels) != 1:
                self.problems.append(((*here, "labels"), f"needs one label, not {len(labels)}"))
            elif block.label_key is not None:
                out.append({block.label_key: str(labels[0]), **content})
            else:
                for label in reversed(labels):
                    content = {str(label): content}
                out.append(content)
        return out

    def value_of(self, text: str | Expression, scope: Mapping[str, Any]) -> tuple[Any, bool]:
        """The value of an HCL expression or of template text, and whether it was one interpolation alone.

        Template text that does not parse is kept as written unless it
        mentions ``var.`` or ``local.`` (then it is an error): JSON and YAML
        strings hold text for the task too (``$HOME``, ``${FOO:-x}`` for a shell).
        """
        if isinstance(text, Expression):
            return self.evaluator.template(text.template, scope)
        if "${" not in text and "%{" not in text:
            return text, False
        try:
            template = parse_template(text)
        except HclSyntaxError as exc:
            if re.search(r"\b(var|local)\.", text):
                raise EvalError(f"cannot read the expression: {exc}") from None
            return text, False
        return self.evaluator.template(template, scope)

    def apply_text(self, text: str | Expression, path: Path, scope: Mapping[str, Any]) -> Any:
        try:
            value, whole = self.value_of(text, scope)
        except _Reported:
            return text
        except EvalError as exc:
            self.problems.append((path, str(exc)))
            return text
        if whole and isinstance(value, str):
            self.coercible.add(render_path(path))
        return value


def _no_names(root: str, name: str) -> Any:
    raise EvalError(f"a default cannot refer to {root}.{name}")


def _from_text(text: str, kind: Node | None) -> Any:
    """A ``--var`` text as a value of the declared type (collections are read as JSON)."""
    if isinstance(kind, Reference) and kind.name in ("number", "bool"):
        value = coerce_scalar(text, "number" if kind.name == "number" else "boolean")
        if value is None:
            raise EvalError("is not a number" if kind.name == "number" else "is not true or false")
        return value
    if kind is None or isinstance(kind, Reference):
        return text
    try:
        return json.loads(text)
    except ValueError:
        raise EvalError(f"is not a valid {_type_text(kind)} (write it as JSON)") from None


def _type_text(kind: Node) -> str:
    if isinstance(kind, Call) and len(kind.args) == 1:
        return f"{kind.name}({_type_text(kind.args[0])})"
    return kind.name if isinstance(kind, Reference) else "value"


def _quoted(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else repr(value)


def coerce_scalar(text: str, json_type: str) -> int | float | bool | None:
    """Read ``text`` as a JSON Schema ``integer``, ``number`` or ``boolean``; None if it is not one."""
    stripped = text.strip()
    if json_type == "boolean":
        return {"true": True, "false": False}.get(stripped)
    if re.fullmatch(r"[+-]?\d{1,30}", stripped):
        return int(stripped)
    if json_type == "number" and re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", stripped):
        return float(stripped)
    return None
