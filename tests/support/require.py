"""HERDER_REQUIRE: turn "skipped, X is not available" into a failure where X must be there.

A fixture that needs something the machine may lack (a Docker daemon, runc,
a JVM, QEMU) calls :func:`require`. Without it the tests that need it are
skipped, which is right on a laptop; CI lists in ``HERDER_REQUIRE`` (comma
separated) the components its machine provides, so that a daemon that did
not start fails the run instead of quietly skipping half of it.
"""

from __future__ import annotations

import os

import pytest

ENV = "HERDER_REQUIRE"


def required() -> set[str]:
    """The components named in HERDER_REQUIRE."""
    return {name.strip() for name in os.environ.get(ENV, "").split(",") if name.strip()}


def require(component: str, available: bool, reason: str) -> None:
    """Skip the test when ``component`` is not available, or fail it when HERDER_REQUIRE names it."""
    if available:
        return
    if component in required():
        pytest.fail(f"{component} is required ({ENV}) but not available: {reason}", pytrace=False)
    pytest.skip(reason)
