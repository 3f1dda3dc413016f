"""herder's pytest plugin, registered as entry point ``herder`` of group ``pytest11``.

It gives every test session of a distribution installed beside herder the
fixtures of the driver conformance kit. With plugin autoloading turned off
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``), load it with ``-p herder.testing.plugin``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

import pytest

from herder.testing.harness import DriverHarness


class HarnessFactory(Protocol):
    """What fixture ``driver_harness`` gives: ``driver_harness("docker", {"volumes_enabled": True})``."""

    def __call__(self, driver: str, plugin_config: Mapping[str, Any] | None = None) -> DriverHarness: ...


@pytest.fixture
def driver_harness(tmp_path: Path) -> Iterator[HarnessFactory]:
    """Make :class:`herder.testing.DriverHarness` objects, each in a data dir of its own under
    ``tmp_path``; every one is closed when the test ends (nothing of its tasks is left)."""
    harnesses: list[DriverHarness] = []

    def make(driver: str, plugin_config: Mapping[str, Any] | None = None) -> DriverHarness:
        harness = DriverHarness(driver, plugin_config, data_dir=tmp_path / f"herder-{len(harnesses)}")
        harnesses.append(harness)
        return harness

    yield make
    errors: list[Exception] = []
    for harness in reversed(harnesses):
        try:
            harness.close()
        except Exception as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ExceptionGroup("closing driver harnesses", errors)
