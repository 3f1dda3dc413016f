"""Go's regular expressions, for the functions of job files and templates.

Nomad's HCL functions and consul-template's are Go's, and Go's ``regexp`` is
RE2: matching takes time linear in the text, whatever the pattern, so a job's
author cannot make herder backtrack for hours (``(a+)+$``). RE2 has no
backreferences and no lookaround; a pattern using them is an error, as in Go.
Python's ``re`` is never used on a pattern from a job.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

MAX_PATTERN = 64 << 10
"""The longest pattern accepted; RE2 bounds the memory of what it compiles too (``max_mem``)."""

_GO_REFERENCE = re.compile(r"\$(?:\$|\{(\w+)\}|(\w+))")
"""A reference in a Go replacement text (``$1``, ``${1}``, ``${name}``, ``$$``); a fixed, linear pattern."""


class RegexpError(ValueError):
    """A pattern Go would refuse, or a result over its limit; the message says which."""


@functools.lru_cache(maxsize=256)
def compile_go(pattern: str) -> Any:
    """``pattern`` compiled with Go's (RE2's) syntax and semantics."""
    if len(pattern) > MAX_PATTERN:
        raise RegexpError(f"the pattern is longer than {MAX_PATTERN} characters")
    options = re2.Options()
    options.log_errors = False  # the error is ours to report, not RE2's to print on stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise RegexpError(f"invalid regular expression {pattern!r}: {reason} (Go's RE2 syntax: no backreferences "
                          "or lookaround)") from None


def matches(pattern: str, text: str) -> Iterator[Any]:
    """The successive non-overlapping matches of ``pattern`` in ``text``."""
    return iter(compile_go(pattern).finditer(text))


def replace_all(pattern: str, text: str, replacement: str, limit: int) -> str:
    """Go's ``Regexp.ReplaceAllString``: ``$1``, ``${name}`` in ``replacement`` expand
    to the groups (an unknown one to nothing), ``$$`` to ``$``.

    :raises RegexpError: the pattern is invalid, or the result would be over
        ``limit`` characters (checked as it is built, never after).
    """
    out: list[str] = []
    size = position = 0
    for match in matches(pattern, text):
        for piece in (text[position:match.start()], _expand(match, replacement)):
            size += len(piece)
            if size > limit:
                raise RegexpError(f"the result would be longer than {limit} characters")
            out.append(piece)
        position = match.end()
    if size + len(text) - position > limit:
        raise RegexpError(f"the result would be longer than {limit} characters")
    out.append(text[position:])
    return "".join(out)


def _expand(match: Any, replacement: str) -> str:
    def group(reference: re.Match[str]) -> str:
        name = reference.group(1) or reference.group(2)
        if name is None:
            return "$"
        try:
            value = match.group(int(name) if name.isdigit() else name)
        except (IndexError, KeyError, re2.error):
            return ""
        return value or ""
    return _GO_REFERENCE.sub(group, replacement)


def groups(match: Any) -> str | list[str] | dict[str, str]:
    """A match as HCL's ``regex`` gives it: the matched text without capture
    groups, a list of the groups, or a map of them when they are named."""
    regex = match.re
    if regex.groups == 0:
        return str(match.group())
    named = regex.groupindex
    if named and len(named) != regex.groups:
        raise RegexpError("a pattern cannot mix named and unnamed capture groups")
    if named:
        return {name: match.group(index) or "" for name, index in named.items()}
    return [value or "" for value in match.groups()]
