"""Version constraints as Nomad checks them: hashicorp/go-version's, and Nomad's semver variant.

A constraint's ``version`` operator reads its value with go-version
(``>= 1.2, < 2``, ``~> 1.4``); ``semver`` with Nomad's
``helper/constraints/semver``: the same operators but ``~>``, only versions
with a ``-`` before their prerelease, and Semver 2.0 ordering with no
special case for prereleases. The two differ where a Nomad user would see it:
go-version's ordering operators never match a prerelease version against a
constraint without one (``5.15.0-91-generic`` is not ``>= 3.0``), semver's do.

Every pattern here is fixed, with no nested repetition, and reads at most
:data:`MAX_TEXT` characters, so a value from a job or a node cannot make
matching slow.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

_NUMBERS = r"v?([0-9]+(?:\.[0-9]+)*?)"
_PRE_PART = r"[0-9A-Za-z\-~]"
_VERSION = re.compile(
    _NUMBERS + rf"(?:-([0-9]+{_PRE_PART}*(?:\.{_PRE_PART}+)*)|-?([A-Za-z\-~]+{_PRE_PART}*(?:\.{_PRE_PART}+)*))?"
    + rf"(?:\+({_PRE_PART}+(?:\.{_PRE_PART}+)*))??")
_SEMVER = re.compile(
    _NUMBERS + rf"(?:-([0-9]+{_PRE_PART}*(?:\.{_PRE_PART}+)*)|-([A-Za-z\-~]+{_PRE_PART}*(?:\.{_PRE_PART}+)*))?"
    + rf"(?:\+({_PRE_PART}+(?:\.{_PRE_PART}+)*))??")
_OPERATOR = re.compile(r"\s*(<=|>=|!=|~>|<|>|=|)\s*(.*?)\s*")

MAX_TEXT = 1024
"""The longest version or constraint read; a longer one is malformed (no real version comes near)."""
MAX_SEGMENT = 2**63 - 1
"""Go parses each segment as an int64: a larger one makes the version malformed."""


@dataclass(frozen=True)
class Version:
    """A parsed version: its numeric segments (at least three), prerelease and metadata."""

    segments: tuple[int, ...]
    pre: str
    metadata: str
    given: int
    """How many segments were written (``1.2`` has two): ``~>`` reads it."""

    def text(self) -> str:
        """go-version's ``String()``: what two equal versions share."""
        text = ".".join(str(s) for s in self.segments)
        if self.pre:
            text += f"-{self.pre}"
        if self.metadata:
            text += f"+{self.metadata}"
        return text


def parse_version(text: str, *, semver: bool = False) -> Version | None:
    """``text`` as go-version's ``NewVersion`` (``NewSemver`` with ``semver``) reads it; None if malformed."""
    match = (_SEMVER if semver else _VERSION).fullmatch(text) if len(text) <= MAX_TEXT else None
    if match is None:
        return None
    numbers = [int(part) for part in match.group(1).split(".")]
    if any(n > MAX_SEGMENT for n in numbers):
        return None
    given = len(numbers)
    numbers += [0] * (3 - len(numbers))
    pre = match.group(3) or match.group(2) or ""
    return Version(tuple(numbers), pre, match.group(4) or "", given)


def compare(left: Version, right: Version) -> int:
    """-1, 0 or 1 as go-version's ``Compare``."""
    if left.text() == right.text():
        return 0
    if left.segments == right.segments:
        if not left.pre and not right.pre:
            return 0
        if not left.pre:
            return 1
        if not right.pre:
            return -1
        return _compare_prereleases(left.pre, right.pre)
    longest = max(len(left.segments), len(right.segments))
    for index in range(longest):
        if index >= len(left.segments):
            return -1 if any(right.segments[index:]) else 0
        if index >= len(right.segments):
            return 1 if any(left.segments[index:]) else 0
        if left.segments[index] != right.segments[index]:
            return -1 if left.segments[index] < right.segments[index] else 1
    return 0


def _compare_prereleases(left: str, right: str) -> int:
    ours, theirs = left.split("."), right.split(".")
    for index in range(max(len(ours), len(theirs))):
        result = _compare_part(ours[index] if index < len(ours) else "", theirs[index] if index < len(theirs) else "")
        if result:
            return result
    return 0


def _compare_part(left: str, right: str) -> int:
    if left == right:
        return 0
    left_numeric, right_numeric = _is_int(left), _is_int(right)
    if not left:
        return -1 if right_numeric else 1
    if not right:
        return 1 if left_numeric else -1
    if left_numeric and not right_numeric:
        return -1
    if right_numeric and not left_numeric:
        return 1
    if not left_numeric:
        return 1 if left > right else -1
    return 1 if int(left) > int(right) else -1


def _is_int(text: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and abs(int(text)) <= MAX_SEGMENT


def _prerelease_check(version: Version, check: Version) -> bool:
    """go-version: a prerelease version meets an ordering constraint only against a prerelease of the same
    segments."""
    if version.pre and check.pre:
        return version.segments == check.segments
    return not version.pre


Check = Callable[[Version], bool]


def _go_version_check(operator: str, check: Version) -> Check:
    if operator in ("", "="):
        return lambda v: compare(v, check) == 0
    if operator == "!=":
        return lambda v: compare(v, check) != 0
    if operator == "~>":
        return lambda v: _pessimistic(v, check)
    wanted = {">": (1,), "<": (-1,), ">=": (0, 1), "<=": (-1, 0)}[operator]
    return lambda v: _prerelease_check(v, check) and compare(v, check) in wanted


def _pessimistic(version: Version, check: Version) -> bool:
    if not _prerelease_check(version, check) or (check.pre and not version.pre):
        return False
    if compare(version, check) < 0:
        return False
    if any(version.segments[i] != check.segments[i] for i in range(check.given - 1)):
        return False
    last = len(check.segments) - 1
    return last < len(version.segments) and check.segments[last] <= version.segments[last]


def _semver_check(operator: str, check: Version) -> Check:
    wanted = {"": (0,), "=": (0,), "!=": (-1, 1), ">": (1,), "<": (-1,), ">=": (0, 1), "<=": (-1, 0)}[operator]
    return lambda v: compare(v, check) in wanted


@functools.lru_cache(maxsize=256)
def parse_constraints(text: str, *, semver: bool = False) -> tuple[Check, ...] | None:
    """The checks of a comma-separated constraint (``>= 1.0, < 2``); None where Nomad's parser
    refuses it (then nothing satisfies it)."""
    if len(text) > MAX_TEXT:
        return None
    checks: list[Check] = []
    for single in text.split(","):
        match = _OPERATOR.fullmatch(single)
        if match is None or (semver and match.group(1) == "~>"):
            return None
        check = parse_version(match.group(2), semver=semver)
        if check is None:
            return None
        checks.append((_semver_check if semver else _go_version_check)(match.group(1), check))
    return tuple(checks)


def satisfies(version: str, constraint: str, *, semver: bool = False) -> bool:
    """Whether ``version`` (read by go-version, whichever the operator) meets ``constraint``, as
    Nomad's ``checkVersionMatch``: a version or constraint that does not parse meets nothing."""
    parsed = parse_version(version)
    checks = parse_constraints(constraint, semver=semver)
    return parsed is not None and checks is not None and all(check(parsed) for check in checks)
