"""Nomad's HCL jobspec syntax -> the canonical job document.

The mapping is Nomad's: ``job "NAME" {}``, ``group "NAME" {}`` and ``task
"NAME" {}`` blocks become ``job``, ``groups[]`` and ``tasks[]`` with the label
as ``name``; a ``task`` directly under ``job`` becomes a group of the same name
holding that one task. Repeated ``service``, ``check``, ``artifact`` and
``template`` blocks become ``services[]``, ``checks[]``, ``artifacts[]`` and
``templates[]``, a task's ``identity`` blocks the list ``identity``; ``port
"LABEL" {}`` blocks inside ``network`` become ``ports[]`` with the label as
``label``; a Connect proxy's ``upstreams`` blocks become ``upstreams[]`` and
its ``expose { path {} }`` blocks ``expose.paths[]``. Any other block is a map (``config``,
``env``, ``meta``, ``resources``, ``restart``, ``logs``, and blocks inside
``config`` such as ``port_map`` or ``labels``); a block that appears more than
once becomes a list of maps. Top-level ``variable "NAME" {}`` blocks (and the
``variables { NAME = default }`` shorthand) become ``variables``; the
attributes of every top-level ``locals {}`` block become ``locals``.

Attribute values are read from python-hcl2's expression rules by
:func:`herder.jobspec.hcl_tree.value`: literals (and lists and maps of them)
become plain data, anything else an :class:`~herder.jobspec.hcl_tree.Expression`,
evaluated with the variables later. python-hcl2 parses the file once; no
source text is read again.

The line of every attribute and block is recorded under its canonical path so
that later problems can name it.
"""

from __future__ import annotations

import functools
import gc
import re
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import hcl2
import hcl2.parser
from hcl2.postlexer import PostLexer
from hcl2.rules.base import AttributeRule, BlockRule, BodyRule
from lark import Lark, Token
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
)

from herder import deadline
from herder.deadline import TimeLimitExceeded
from herder.errors import JobError
from herder.jobspec.hcl_eval import HclSyntaxError, Interpolation, Reference
from herder.jobspec.hcl_tree import Expression, value
from herder.jobspec.paths import Locator, Path, render_path

_OPTIONS = hcl2.SerializationOptions(
    strip_string_quotes=True,
    with_comments=False,
    preserve_heredocs=False,
    preserve_scientific_notation=False,
)


@dataclass(frozen=True)
class _Attribute:
    name: str
    value: Any
    line: int | None


@dataclass(frozen=True)
class _Block:
    type: str
    labels: list[str]
    body: list[_Attribute | _Block]
    line: int | None


@dataclass(frozen=True)
class _ListOf:
    """Repeated blocks collected into the list ``key``, labelled by ``label_key``."""

    key: str
    label_key: str | None
    context: _Context


@dataclass(frozen=True)
class _Context:
    """How the blocks of one kind of body map onto the canonical document."""

    lists: dict[str, _ListOf] = field(default_factory=dict)
    blocks: dict[str, _Context] = field(default_factory=dict)


@dataclass(frozen=True)
class DynamicBlock:
    """A ``dynamic "TYPE" { for_each, iterator, labels, content }`` block, expanded once variables are known.

    It stands where the blocks it generates go (in the list of ``port``,
    ``service`` ... blocks, or the list of a generic block's maps), and
    :mod:`herder.jobspec.variables` replaces it with one map of ``content``
    per element of ``for_each``, the element visible as ``ITERATOR.key`` and
    ``ITERATOR.value``, its ``labels`` evaluated too: the label of a labelled
    block (``label_key``), or the keys a generic block's map nests under.
    """

    for_each: Any
    iterator: str
    labels: Any
    content: dict[str, Any]
    label_key: str | None
    line: int | None


_MAP = _Context()
_NETWORK = _Context(lists={"port": _ListOf("ports", "label", _MAP)})
_PROXY = _Context(lists={"upstreams": _ListOf("upstreams", None, _MAP)},
                  blocks={"expose": _Context(lists={"path": _ListOf("paths", None, _MAP)})})
_CONNECT = _Context(blocks={"sidecar_service": _Context(blocks={"proxy": _PROXY})})
_SERVICE = _Context(lists={"check": _ListOf("checks", None, _MAP)}, blocks={"connect": _CONNECT})
_CONSTRAINT = _ListOf("constraints", None, _MAP)
_TASK = _Context(
    lists={
        "constraint": _CONSTRAINT,
        "service": _ListOf("services", None, _SERVICE),
        "artifact": _ListOf("artifacts", None, _MAP),
        "template": _ListOf("templates", None, _MAP),
        "volume_mount": _ListOf("volume_mounts", None, _MAP),
        "identity": _ListOf("identity", None, _MAP),
    },
    blocks={"resources": _Context(blocks={"network": _NETWORK})},
)
_GROUP = _Context(lists={"task": _ListOf("tasks", "name", _TASK), "service": _ListOf("services", None, _SERVICE),
                         "constraint": _CONSTRAINT, "volume": _ListOf("volumes", "name", _MAP)},
                  blocks={"network": _NETWORK})
_JOB = _Context(lists={"group": _ListOf("groups", "name", _GROUP), "constraint": _CONSTRAINT})


def parse_hcl(text: str, source: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Parse a Nomad job file; return the canonical document and its line map."""
    text = _heredoc_closers(text)
    unreadable: list[str] = []
    try:
        with _collection_paused():
            # python-hcl2's newline: its grammar cannot see the end of the file as the end of a line.
            tree = hcl2.transform(_parser().parse(text + "\n"))
            body = _read_body(tree.body, unreadable)
    except TimeLimitExceeded:
        raise
    except UnexpectedInput as exc:
        raise JobError([f"{source}:{exc.line}:{exc.column}: {_describe_syntax_error(exc)}"]) from None
    except Exception as exc:
        raise JobError([f"{source}: cannot parse HCL: {exc}"]) from None
    if unreadable:
        raise JobError([f"{source}:{problem}" for problem in unreadable])
    converter = _Converter()
    document = converter.document(body)
    if converter.problems:
        locator = Locator(source, converter.lines)
        raise JobError([locator.format(path, message, line) for path, message, line in converter.problems])
    return document, converter.lines


class _TimedPostLexer(PostLexer):
    """python-hcl2's post-lexer, looking at the clock every 1,024 tokens: lark's parse is the
    one loop of an HCL job's reading that herder does not run itself."""

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        for count, token in enumerate(super().process(stream)):
            if not count & 1023:
                deadline.check()
            yield token


@functools.cache
def _parser() -> Lark:
    """python-hcl2's parser (its grammar and its table cache, as :func:`hcl2.parser.parser`),
    with :class:`_TimedPostLexer`."""
    return Lark.open("hcl2.lark", parser="lalr", cache=str(hcl2.parser.PARSER_FILE), rel_to=hcl2.parser.__file__,
                     propagate_positions=True, postlex=_TimedPostLexer())


_pause = {"parses": 0, "resume": False}
"""How many parses run with the collector paused, and whether it was on before the first."""
_pause_lock = threading.Lock()


@contextmanager
def _collection_paused() -> Iterator[None]:
    """Python's cycle collector off while a parse builds its tree, on again after the last.

    A parse makes a few dozen objects per attribute, all alive until it
    ends, and each full collection meanwhile walks every one of them: with
    it on, a 60,000-attribute job took twice as long, and more than twice
    the time of one half as large. The tree's cycles (python-hcl2's parent
    links) are collected once the collector is on again.
    """
    with _pause_lock:
        if not _pause["parses"]:
            _pause["resume"] = gc.isenabled()
            gc.disable()
        _pause["parses"] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pause["parses"] -= 1
            if not _pause["parses"] and _pause["resume"]:
                gc.enable()


_HEREDOC_OPENER = re.compile(r"<<-?([A-Za-z][A-Za-z0-9._-]*)\r?$")


def _heredoc_closers(text: str) -> str:
    """The text with the closing line of each heredoc as python-hcl2's grammar wants it.

    HCL2 (and so Nomad) accepts spaces after a heredoc's closing marker;
    python-hcl2's grammar wants the marker alone on its line. Lines are kept,
    so positions in messages stay right.
    """
    lines = text.split("\n")
    marker: str | None = None
    for index, line in enumerate(lines):
        if marker is None:
            opener = _HEREDOC_OPENER.search(line)
            marker = opener.group(1) if opener else None
        elif line.strip() == marker:
            lines[index] = line.rstrip()
            marker = None
    return "\n".join(lines)


def _describe_syntax_error(exc: UnexpectedInput) -> str:
    if isinstance(exc, UnexpectedCharacters):
        return f"syntax error: unexpected character {exc.char!r}"
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        return "syntax error: unexpected end of file (is a closing brace or quote missing?)"
    if isinstance(exc, UnexpectedToken):
        token = str(exc.token.value).strip().splitlines()
        shown = token[0][:40] if token else "end of line"
        return f"syntax error: unexpected {shown!r}"
    return "syntax error"


def _line(rule: Any) -> int | None:
    """The line a rule starts on: lark's position of the rule, as python-hcl2 hands it back to lark.

    ``to_lark()`` rebuilds the rule's whole subtree: a block's line is its
    type's (the identifier it starts with), so that a block of 60,000
    attributes is not rebuilt for each block around it.
    """
    if isinstance(rule, BlockRule):
        rule = rule.labels[0]
    return getattr(rule.to_lark().meta, "line", None)


def _read_body(body: BodyRule, problems: list[str]) -> list[_Attribute | _Block]:
    """The attributes and blocks of ``body``; an expression herder cannot evaluate is added to ``problems``
    with its line."""
    items: list[_Attribute | _Block] = []
    deadline.check()
    for child in body.children:
        if isinstance(child, AttributeRule):
            name = str(child.identifier.serialize(_OPTIONS))
            try:
                items.append(_Attribute(name, value(child.expression), _line(child)))
            except HclSyntaxError as exc:
                problems.append(f"{_line(child)}: {name}: {exc}")
        elif isinstance(child, BlockRule):
            block_type, *labels = (str(label.serialize(_OPTIONS)) for label in child.labels)
            items.append(_Block(block_type, labels, _read_body(child.body, problems), _line(child)))
    return items


class _Converter:
    def __init__(self) -> None:
        self.lines: dict[str, int] = {}
        self.problems: list[tuple[Path, str, int | None]] = []

    def _mark(self, path: Path, line: int | None) -> None:
        if line is not None:
            self.lines.setdefault(render_path(path), line)

    def _problem(self, path: Path, line: int | None, message: str) -> None:
        self.problems.append((path, message, line))

    def document(self, items: list[_Attribute | _Block]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        variables: dict[str, Any] = {}
        local_values: dict[str, Any] = {}
        for item in items:
            if isinstance(item, _Block) and item.type == "job":
                if "job" in out:
                    self._problem(("job",), item.line, "a job file holds one job")
                    continue
                out["job"] = self.labelled(item, ("job",), "name", _JOB)
            elif isinstance(item, _Block) and item.type == "variable":
                name = self.single_label(item, ("variables",))
                if name is not None:
                    variables[name] = self.body(item.body, ("variables", name), _MAP)
                    self._mark(("variables", name), item.line)
            elif isinstance(item, _Block) and item.type == "variables":
                self.add_shorthand_variables(variables, item)
            elif isinstance(item, _Block) and item.type == "locals":
                self.add_locals(local_values, item)
            elif isinstance(item, _Block):
                self._problem((item.type,), item.line, f"unknown key {item.type!r}")
            elif item.name in out:
                self._problem((item.name,), item.line, "is set twice")
            else:
                out[item.name] = item.value
                self._mark((item.name,), item.line)
        if variables and "variables" in out:
            self._problem(("variables",), self.lines.get("variables"), "is set twice")
        elif variables:
            out["variables"] = variables
        if local_values:
            out["locals"] = local_values
        return out

    def add_locals(self, local_values: dict[str, Any], block: _Block) -> None:
        """``locals { NAME = EXPR }``: several blocks add to one set of names."""
        if block.labels:
            self._problem(("locals",), block.line, "a 'locals' block takes no label")
        for entry in block.body:
            path: Path = ("locals", entry.name if isinstance(entry, _Attribute) else entry.type)
            if isinstance(entry, _Block):
                self._problem(path, entry.line, "must be an attribute: NAME = EXPRESSION")
            elif entry.name in local_values:
                self._problem(path, entry.line, "is set twice")
            else:
                local_values[entry.name] = entry.value
                self._mark(path, entry.line)

    def add_shorthand_variables(self, variables: dict[str, Any], block: _Block) -> None:
        """``variables { NAME = DEFAULT }``: a variable of each attribute."""
        if block.labels:
            self._problem(("variables",), block.line, "a 'variables' block takes no label")
        for entry in block.body:
            path: Path = ("variables", entry.name if isinstance(entry, _Attribute) else entry.type)
            self._mark(path, entry.line)
            if isinstance(entry, _Attribute):
                variables[entry.name] = {"default": entry.value}
            else:
                self._problem(path, entry.line, "must be an attribute: NAME = DEFAULT")

    def single_label(self, block: _Block, path: Path) -> str | None:
        if len(block.labels) != 1:
            self._problem(path, block.line, f"a {block.type!r} block takes exactly one label")
            return None
        return block.labels[0]

    def labelled(self, block: _Block, path: Path, label_key: str | None, context: _Context) -> dict[str, Any]:
        """Convert a block whose label, if it takes one, becomes ``label_key``."""
        self._mark(path, block.line)
        if label_key is None:
            if block.labels:
                self._problem(path, block.line, f"a {block.type!r} block takes no label")
            return self.body(block.body, path, context)
        head: dict[str, Any] = {}
        if len(block.labels) > 1:
            self._problem(path, block.line, f"a {block.type!r} block takes one label")
        elif block.labels:
            head[label_key] = block.labels[0]
            self._mark((*path, label_key), block.line)
        return head | self.body(block.body, path, context)

    def body(self, items: list[_Attribute | _Block], path: Path, context: _Context) -> dict[str, Any]:
        out: dict[str, Any] = {}
        counts: Counter[str] = Counter()
        for item in items:
            if isinstance(item, _Block) and item.type == "dynamic" and item.labels:
                counts[item.labels[0]] += 2  # a generic block made by 'dynamic' is a list, however many
            elif isinstance(item, _Block):
                counts[item.type] += 1
        seen: Counter[str] = Counter()
        from_blocks: set[str] = set()
        for item in items:
            if isinstance(item, _Attribute):
                if item.name in context.lists or item.name in out:
                    message = "must be written as a block" if item.name in context.lists else "is set twice"
                    self._problem((*path, item.name), item.line, message)
                else:
                    out[item.name] = item.value
                    self._mark((*path, item.name), item.line)
                continue
            if item.type == "dynamic":
                self.add_dynamic(out, item, path, context, from_blocks)
                continue
            index = seen[item.type]
            seen[item.type] += 1
            spec = context.lists.get(item.type)
            key = "groups" if context is _JOB and item.type == "task" else spec.key if spec else item.type
            if key in out and key not in from_blocks:
                self._problem((*path, key), item.line, "is set twice")
                continue
            from_blocks.add(key)
            if context is _JOB and item.type == "task":
                self.add_task_as_group(out, item, path)
            elif spec is not None:
                items_out = out.setdefault(spec.key, [])
                child = self.labelled(item, (*path, spec.key, len(items_out)), spec.label_key, spec.context)
                items_out.append(child)
                self._mark((*path, spec.key), item.line)
            else:
                self.add_generic(out, item, path, counts[item.type], index, context)
        return out

    def add_dynamic(self, out: dict[str, Any], block: _Block, path: Path, context: _Context,
                    from_blocks: set[str]) -> None:
        """``dynamic "TYPE" { ... }``: a :class:`DynamicBlock` where the blocks of TYPE go."""
        here: Path = (*path, "dynamic")
        if len(block.labels) != 1:
            self._problem(here, block.line, "a 'dynamic' block takes one label, the type of the blocks it makes")
            return
        kind = block.labels[0]
        spec = context.lists.get(kind)
        if (context is _JOB and kind == "task") or kind in ("dynamic", "content"):
            self._problem((*path, kind), block.line, f"blocks {kind!r} cannot be made by a 'dynamic' block")
            return
        key = spec.key if spec else kind
        if key in out and key not in from_blocks:
            self._problem((*path, key), block.line, "is set twice")
            return
        from_blocks.add(key)
        items = out.setdefault(key, [])
        item_path: Path = (*path, key, len(items))
        self._mark(item_path, block.line)
        attributes = {item.name: item for item in block.body if isinstance(item, _Attribute)}
        contents = [item for item in block.body if isinstance(item, _Block) and item.type == "content"]
        for item in block.body:
            name = item.type if isinstance(item, _Block) else item.name
            if name not in ("for_each", "iterator", "labels", "content") or \
                    (name == "content") != isinstance(item, _Block):
                self._problem((*here, name), item.line, f"unknown key {name!r} in a 'dynamic' block")
        if "for_each" not in attributes or len(contents) != 1:
            self._problem(here, block.line, "a 'dynamic' block needs for_each and one content block")
            return
        iterator = attributes["iterator"].value if "iterator" in attributes else kind
        if isinstance(iterator, Expression) and len(iterator.template.parts) == 1:
            [part] = iterator.template.parts  # a bare name reads as a reference
            iterator = part.expression.name if isinstance(part, Interpolation) and \
                isinstance(part.expression, Reference) else None
        if not isinstance(iterator, str) or not iterator.isidentifier():
            self._problem((*here, "iterator"), block.line, "must be a name")
            return
        content_context = spec.context if spec else context.blocks.get(kind, _MAP)
        content = self.body(contents[0].body, item_path, content_context)
        labels = attributes["labels"].value if "labels" in attributes else []
        items.append(DynamicBlock(attributes["for_each"].value, iterator, labels, content,
                                  spec.label_key if spec else None, block.line))
        self._mark((*path, key), block.line)

    def add_task_as_group(self, out: dict[str, Any], block: _Block, path: Path) -> None:
        groups = out.setdefault("groups", [])
        group_path: Path = (*path, "groups", len(groups))
        self._mark(group_path, block.line)
        task = self.labelled(block, (*group_path, "tasks", 0), "name", _TASK)
        group: dict[str, Any] = {"tasks": [task]}
        if "name" in task:
            group["name"] = task["name"]
        groups.append(group)

    def add_generic(
        self, out: dict[str, Any], item: _Block, path: Path, count: int, index: int, context: _Context
    ) -> None:
        """Add a block as a map (nested under its labels), or a list of maps when repeated."""
        here: Path = (*path, item.type) if count == 1 else (*path, item.type, index)
        self._mark(here, item.line)
        value = self.body(item.body, (*here, *item.labels), context.blocks.get(item.type, _MAP))
        for label in reversed(item.labels):
            value = {label: value}
        if count == 1:
            out[item.type] = value
        else:
            out.setdefault(item.type, []).append(value)
