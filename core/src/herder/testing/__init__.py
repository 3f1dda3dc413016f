"""The driver conformance kit: herder's driver contract as tests a driver inherits.

- :class:`DriverContract`: subclass it in a driver's test module, name the
  driver and give a few task configs, and pytest runs the contract's tests.
- :class:`DriverHarness` and :class:`TaskRun`: one driver loaded as herder
  loads it, running tasks through herder's hook facade one step at a time,
  for tests of one's own (fixture ``driver_harness``).

The fixtures come from herder's pytest plugin, :mod:`herder.testing.plugin`,
which pytest loads by itself wherever herder is installed.
"""

from __future__ import annotations

from herder.testing.contract import DriverContract
from herder.testing.harness import DidNotReturn, DriverHarness, DriverNotLoaded, TaskRun

__all__ = ["DidNotReturn", "DriverContract", "DriverHarness", "DriverNotLoaded", "TaskRun"]
