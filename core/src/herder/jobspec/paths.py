"""Paths into the canonical job document, and messages that name them.

A path is a tuple of keys and list indexes, ``("job", "groups", 0, "name")``,
rendered as ``job.groups[0].name``. Keys that are not plain identifiers are
quoted: ``job.meta["team.name"]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

Path = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def render_path(path: Path, root: str = "") -> str:
    """Render ``path`` as text, appended to ``root`` when given."""
    text = root
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            text += f".{part}" if text else part
        else:
            text += f"[{json.dumps(part)}]"
    return text


def renumber(lines: Mapping[str, int], items: Path, kept: list[int]) -> dict[str, int]:
    """The line map after the list at ``items`` kept only its items ``kept`` (old indexes, in order)."""
    prefix = render_path(items)
    moved = {render_path((*items, old)): render_path((*items, new)) for new, old in enumerate(kept)}
    pattern = re.compile(re.escape(prefix) + r"\[\d+\]")
    out: dict[str, int] = {}
    for key, line in lines.items():
        match = pattern.match(key)
        if match is None:
            out[key] = line
        elif match.group(0) in moved:
            out[moved[match.group(0)] + key[match.end():]] = line
    return out


@dataclass(frozen=True)
class Locator:
    """Formats problems as ``source:line: path: message``.

    ``lines`` maps rendered paths to the line where the file sets them; a path
    without an entry of its own takes the line of its nearest ancestor that has
    one. Without any line, a message is just ``path: message``.
    """

    source: str
    lines: Mapping[str, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int | None:
        for end in range(len(path), 0, -1):
            line = self.lines.get(render_path(path[:end]))
            if line is not None:
                return line
        return None

    def format(self, path: Path, message: str, line: int | None = None) -> str:
        """The message, at ``line`` if given, else at the line ``path`` has."""
        where = f"{render_path(path)}: " if path else ""
        line = line if line is not None else self.line_of(path)
        prefix = f"{self.source}:{line}: " if line is not None else ""
        return f"{prefix}{where}{message}"
