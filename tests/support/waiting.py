"""Waiting in tests for something another thread or process does: never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(predicate: Callable[[], object], timeout: float = 20.0, interval: float = 0.05) -> bool:
    """True as soon as ``predicate()`` is; False if it never was within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def wait_for(check: Callable[[], T], timeout: float = 20.0, what: str = "condition", interval: float = 0.05) -> T:
    """Call ``check`` until it returns something true, and return that; AssertionError
    naming ``what`` if it does not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for: {what}")
        time.sleep(interval)
