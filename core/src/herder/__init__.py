"""herder: run tasks on one host through pluggable drivers.

Everything a plugin author needs is importable from here.
"""

from __future__ import annotations

import pluggy

from herder.context import AllocatedPort, CreatedResources, TaskContext, TaskDir
from herder.errors import CleanupLater, DriverError, RecoverableError
from herder.model import Task
from herder.objects import (
    EXEC_OUTPUT_LIMIT,
    Alloc,
    DriverNetwork,
    ExecResult,
    ExitResult,
    Fingerprint,
    TaskEvent,
    TaskHandle,
)

hookimpl = pluggy.HookimplMarker("herder")
"""Marker for hook implementations: ``@herder.hookimpl``."""

__all__ = [
    "EXEC_OUTPUT_LIMIT",
    "Alloc",
    "AllocatedPort",
    "CleanupLater",
    "CreatedResources",
    "DriverError",
    "DriverNetwork",
    "ExecResult",
    "ExitResult",
    "Fingerprint",
    "RecoverableError",
    "Task",
    "TaskContext",
    "TaskDir",
    "TaskEvent",
    "TaskHandle",
    "hookimpl",
]
