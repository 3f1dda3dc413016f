"""HERDER_REQUIRE: turn "skipped, X is not available" into a failure where X must be there.

A fixture that needs something the machine may lack (a Docker daemon, runc,
the CNI plugins and root for network namespaces (``cni``),
a JVM, QEMU) calls :func:`require`. Without it the tests that need it are
skipped, which is right on a laptop; CI lists in ``HERDER_REQUIRE`` (comma
separated) the components its machine provides, so that a daemon that did
not start fails the run instead of quietly skipping half of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pytest

from herder.objects import Fingerprint
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

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


def require_driver(name: str, plugin_config: Mapping[str, Mapping[str, Any]] | None = None, *,
                   healthy: bool = True) -> Fingerprint:
    """The driver ``name`` is installed and loads, and its fingerprint finds it detected
    (and healthy, with ``healthy``): else skip, or fail under HERDER_REQUIRE."""
    plugins = load_plugins(plugin_config)
    record = plugins.record(name)
    require(name, record is not None and not record.error,
            f"the {name} driver is not installed or did not load: {record.error if record else 'no entry point'}")
    fingerprint = Hooks(plugins).fingerprint(name)
    require(name, fingerprint.detected and (fingerprint.healthy or not healthy),
            f"the {name} driver is not available: {fingerprint.description}")
    return fingerprint
