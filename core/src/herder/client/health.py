"""A service check's health, as the front ends see it change."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HealthChange:
    """A check whose status changed: what ``herder run`` shows and ``--json`` prints."""

    alloc_id: str
    alloc_name: str
    task: str
    service: str
    check: str
    status: str
    output: str
