"""Input variables, as Nomad's HCL2 jobspec has them.

A job file declares variables at the top level (HCL: ``variable "NAME" {
default = ..., type = ..., description = ... }``; JSON and YAML: ``variables:
{NAME: {default: ...}}``) and refers to them as ``${var.NAME}`` in any string
of the job. Values given to :func:`herder.jobspec.load_job` (``--var``)
override defaults and are typed by the declaration's ``type`` (``string``,
``number``, ``bool``; other types are read as JSON). ``$${`` writes ``${``
untouched by variables, for runtime interpolation to resolve, as in Nomad.

A string that is nothing but one reference takes the variable's value as it
is, so ``count = var.n`` gives a number. A string value put in such a place is
remembered: where the job schema wants a number or a boolean there, validation
converts it (as HCL's type conversion would).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from herder.jobspec.paths import Path, render_path

_REFERENCE = re.compile(r"\$\$\{|\$\{\s*var\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}")


def apply_variables(
    document: dict[str, Any], given: Mapping[str, str] | None
) -> tuple[list[tuple[Path, str]], set[str]]:
    """Substitute variables into ``document["job"]`` in place.

    Returns the problems found and the rendered paths where a whole string was
    replaced by a string value (the places validation may convert).
    """
    substitution = _Substitution(document.get("variables"))
    for name, text in (given or {}).items():
        substitution.give(name, text)
    if "job" in document:
        document["job"] = substitution.apply(document["job"], ("job",))
    return substitution.problems, substitution.coercible


class _Substitution:
    def __init__(self, declared: Any) -> None:
        self.declarations: dict[str, Any] = declared if isinstance(declared, dict) else {}
        self.values: dict[str, Any] = {}
        self.problems: list[tuple[Path, str]] = []
        self.coercible: set[str] = set()
        for name, declaration in self.declarations.items():
            if isinstance(declaration, dict) and declaration.get("default") is not None:
                self.values[name] = declaration["default"]

    def give(self, name: str, text: str) -> None:
        declaration = self.declarations.get(name)
        if declaration is None:
            self.problems.append(((), f"variable {name!r} is given a value but the job file does not declare it"))
            return
        declared_type = declaration.get("type") if isinstance(declaration, dict) else None
        try:
            self.values[name] = _typed(text, declared_type)
        except ValueError as exc:
            self.problems.append((("variables", name), f"the value given, {text!r}, {exc}"))

    def apply(self, value: Any, path: Path) -> Any:
        if isinstance(value, dict):
            return {key: self.apply(item, (*path, key)) for key, item in value.items()}
        if isinstance(value, list):
            return [self.apply(item, (*path, index)) for index, item in enumerate(value)]
        if isinstance(value, str):
            return self.apply_text(value, path)
        return value

    def apply_text(self, text: str, path: Path) -> Any:
        whole = _REFERENCE.fullmatch(text)
        if whole and whole.group(1):
            name = whole.group(1)
            if not self.known(name, path):
                return text
            if isinstance(self.values[name], str):
                self.coercible.add(render_path(path))
            return self.values[name]

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:
                return "${"
            if not self.known(name, path):
                return match.group(0)
            value = self.values[name]
            if isinstance(value, (dict, list)):
                self.problems.append((path, f"variable {name!r} is not a single value and cannot be part of a string"))
                return match.group(0)
            return _text(value)

        return _REFERENCE.sub(replace, text)

    def known(self, name: str, path: Path) -> bool:
        if name in self.values:
            return True
        if name in self.declarations:
            self.problems.append((path, f"variable {name!r} has no value (give one with --var {name}=VALUE)"))
        else:
            self.problems.append((path, f"variable {name!r} is not declared"))
        return False


def _typed(text: str, declared_type: Any) -> Any:
    kind = str(declared_type or "any").removeprefix("${").removesuffix("}").strip()
    if kind in ("any", "string"):
        return text
    if kind == "number":
        number = coerce_scalar(text, "number")
        if number is None:
            raise ValueError("is not a number")
        return number
    if kind == "bool":
        flag = coerce_scalar(text, "boolean")
        if flag is None:
            raise ValueError("is not true or false")
        return flag
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(f"is not a valid {kind} (write it as JSON)") from None


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


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
