"""Waiting in tests for something another thread or process does: never a fixed sleep.

A test waits for the condition it means, through :func:`wait_for` (or :func:`poll` for a
negative check), and fails with a message naming what it waited for. The timeout only stops a
hang: it is generous (:data:`TIMEOUT`), so that a loaded machine makes a test slower, not red.
``tests/core/test_waiting.py`` fails on a ``sleep`` call in ``tests/`` outside this module unless
its line carries :data:`DELIBERATE` and says why the time itself is the test's subject.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 30.0
"""Seconds before a wait gives up: long enough for a loaded 2-core machine, short of a hung suite."""

INTERVAL = 0.05
"""Seconds between two looks at the condition."""

DELIBERATE = "# deliberate sleep:"
"""The comment that justifies a fixed sleep in a test: the time passing is what the test is about."""

SH_WAIT_FOR = ("wait_for() { i=0; while ! test -s \"$1\"; do i=$((i+1)); [ $i -gt 1200 ] && return 1; "
               "sleep 0.05; done; }; wait_for")
"""A job script's wait for a file another process writes (``{SH_WAIT_FOR} /path``): done as soon as
the file has content; it fails (status 1) after 60 s, like :func:`wait_for` in shell."""


def poll(predicate: Callable[[], object], timeout: float = TIMEOUT, interval: float = INTERVAL) -> bool:
    """True as soon as ``predicate()`` is; False if it never was within ``timeout``.

    For a positive check prefer :func:`wait_for`, whose failure says what was awaited; ``poll``
    is for checks that something does *not* happen within a window (``assert not poll(...)``).
    """
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def wait_for(check: Callable[[], T | None], timeout: float = TIMEOUT, what: str | Callable[[], str] = "condition",
             interval: float = INTERVAL) -> T:
    """Call ``check`` until it returns something true, and return that.

    AssertionError naming ``what`` if it does not within ``timeout``; ``what`` may be a function,
    called then, so that the message also says what was seen instead.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for: {described}")
        time.sleep(interval)


def wait_for_text(path: Path, timeout: float = TIMEOUT) -> str:
    """The text of ``path`` (stripped) once another process has written some."""
    return wait_for(lambda: path.read_text().strip() if path.exists() else None, timeout, f"{path} written")
