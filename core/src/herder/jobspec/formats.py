"""Reading job files: the format by extension, the text into a document.

Every reader returns the document as plain data plus a map from rendered
paths to line numbers (empty for JSON, whose parser does not report them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from herder import deadline
from herder.errors import JobError
from herder.jobspec.hcl import parse_hcl
from herder.jobspec.paths import Path as DocPath
from herder.jobspec.paths import render_path

FORMATS = {".hcl": "hcl", ".nomad": "hcl", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}
MAX_JOB_SIZE = 4 << 20
"""The largest job file read (bytes), as the agent's largest request: a job file is a few KiB."""
MAX_ALIAS_NODES = 10_000
"""How many nodes YAML aliases may add to a document, all repetitions counted: enough to
share a block of settings, far too few for an alias bomb (nine levels of nine aliases)."""


def format_of(path: Path) -> str:
    """The format of a job file, from its extension."""
    try:
        return FORMATS[path.suffix.lower()]
    except KeyError:
        known = ", ".join(FORMATS)
        raise JobError([f"{path}: unknown job file format {path.suffix!r} (expected one of {known})"]) from None


def read_text(path: Path) -> str:
    """The text of a job file, with every failure reported as JobError."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_JOB_SIZE + 1)
    except OSError as exc:
        raise JobError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    if len(data) > MAX_JOB_SIZE:
        raise JobError([f"{path}: the job file is larger than {MAX_JOB_SIZE} bytes"])
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JobError([f"{path}: not UTF-8 text (invalid byte at offset {exc.start})"]) from None


def parse_text(text: str, fmt: str, source: str) -> tuple[Any, dict[str, int]]:
    """Parse ``text`` written in ``fmt`` (``hcl``, ``json`` or ``yaml``)."""
    if fmt == "hcl":
        return parse_hcl(text, source)
    if fmt == "json":
        return _parse_json(text, source), {}
    if fmt == "yaml":
        return _parse_yaml(text, source)
    raise ValueError(f"unknown job file format {fmt!r}")


def _parse_json(text: str, source: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JobError([f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"]) from None
    except ValueError as exc:
        raise JobError([f"{source}: invalid JSON: {exc}"]) from None


class _TimedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, looking at the clock at each node it composes."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        deadline.check()
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


def _parse_yaml(text: str, source: str) -> tuple[Any, dict[str, int]]:
    loader = _TimedLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_aliases(node, source)
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise JobError([f"{where}: invalid YAML: {exc.problem or exc.context}"]) from None
    except (yaml.YAMLError, ValueError) as exc:
        raise JobError([f"{source}: invalid YAML: {exc}"]) from None
    finally:
        loader.dispose()
    lines: dict[str, int] = {}
    if node is not None:
        _yaml_lines(node, (), lines)
    return _string_keys(data), lines


def _check_aliases(root: yaml.Node, source: str) -> None:
    """Refuse a document whose aliases expand it by more than :data:`MAX_ALIAS_NODES`.

    An alias is the very node its anchor names, so the composed document is a
    graph as small as the text; what grows exponentially is every walk that
    expands it. Its expanded size is counted here on the graph, once per node.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise JobError([f"{source}: invalid YAML: an alias refers to a node that contains it"])
        open_nodes.add(id(node))
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        total = 1 + sum(size(child) for child in children)
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    if size(root) - len(sizes) > MAX_ALIAS_NODES:
        raise JobError([f"{source}: YAML aliases expand the document by more than {MAX_ALIAS_NODES} nodes "
                        "(write the repeated values out, or use HCL variables and locals)"])


def _yaml_lines(node: yaml.Node, path: DocPath, lines: dict[str, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                here = (*path, str(key.value))
                lines.setdefault(render_path(here), key.start_mark.line + 1)
                _yaml_lines(value, here, lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            here = (*path, index)
            lines.setdefault(render_path(here), item.start_mark.line + 1)
            _yaml_lines(item, here, lines)


def _string_keys(value: Any) -> Any:
    """YAML allows keys of any type (``yes:`` is a boolean); a job file's are strings."""
    if isinstance(value, dict):
        return {_key_text(key): _string_keys(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_string_keys(item) for item in value]
    return value


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "" if key is None else str(key)


def read_var_file(path: Path) -> dict[str, str]:
    """The values of a ``--var-file`` (``NAME = VALUE`` lines in HCL, or a JSON
    object), as the texts ``--var NAME=VALUE`` would give: strings as they
    are, other values as JSON, each read by its variable's declared type."""
    text = read_text(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        values = _parse_json(text, str(path)) if text.strip() else {}
    elif suffix in (".hcl", ".nomad"):
        values, _ = parse_hcl(text, str(path))
    else:
        raise JobError([f"{path}: unknown variable file format {path.suffix!r} (expected .hcl or .json)"])
    if not isinstance(values, dict) or "job" in values or "variables" in values:
        raise JobError([f"{path}: a variable file holds NAME = VALUE assignments only"])
    return {name: value if isinstance(value, str) else json.dumps(value) for name, value in values.items()}
