"""Durations as job files write them: ``500ms``, ``10s``, ``1m30s``, ``2h``.

Strings follow Go's ``time.ParseDuration`` (as Nomad reads them) without the
sign; plain numbers are seconds.
"""

from __future__ import annotations

import math
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(value: object) -> float:
    """Return ``value`` in seconds; raise ValueError (TypeError for a value
    that is neither a string nor a number) if it is not a duration."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError("must be a duration such as 10s or a number of seconds")
    if isinstance(value, (int, float)):
        seconds = float(value)
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError("must be a non-negative number of seconds")
        return seconds
    text = value.strip()
    if text == "0":
        return 0.0
    if not text:
        raise ValueError("must not be empty")
    total, position = 0.0, 0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None:
            problem = "has no unit" if re.fullmatch(r"[\d.]+", text) else "is not a duration"
            raise ValueError(f"{value!r} {problem}: use e.g. 500ms, 10s, 1m30s, 2h")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if not math.isfinite(total):
        raise ValueError(f"{value!r} is too long a duration")
    return total


def format_duration(seconds: float) -> str:
    """Render seconds compactly: ``500ms``, ``15s``, ``1m30s``, ``2h``."""
    if seconds < 1 and seconds != 0:
        return f"{round(seconds * 1000, 3):g}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{int(hours)}h")
    if minutes:
        parts.append(f"{int(minutes)}m")
    if secs or not parts:
        parts.append(f"{round(secs, 3):g}s")
    return "".join(parts)
