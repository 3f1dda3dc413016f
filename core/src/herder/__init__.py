"""herder: run tasks on one host through pluggable drivers.

Everything a plugin author needs is importable from here.

The names are loaded on first use, so that a process that needs none of them
starts fast and small: the process supervisor (``python -m
herder.supervisor``) is started for every data dir and imports only the
standard library and its own modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pluggy

    from herder.context import AllocatedPort, CreatedResources, HostMount, TaskContext, TaskDir
    from herder.errors import CleanupLater, DriverError, RecoverableError
    from herder.model import Task
    from herder.objects import (
        EXEC_OUTPUT_LIMIT,
        Alloc,
        AllocNetwork,
        DriverCapabilities,
        DriverNetwork,
        ExecResult,
        ExecSession,
        ExecStream,
        ExitResult,
        Fingerprint,
        NetworkDNS,
        NetworkIsolation,
        TaskEvent,
        TaskHandle,
        TaskStats,
    )

    hookimpl: pluggy.HookimplMarker
    """Marker for hook implementations: ``@herder.hookimpl``."""

__version__ = "0.1.0"
"""herder's version, written here only (the distribution's metadata reads it): ``herder --version``
shows it without looking through the installed distributions."""

_MODULES = {
    "herder.context": ("AllocatedPort", "CreatedResources", "HostMount", "TaskContext", "TaskDir"),
    "herder.errors": ("CleanupLater", "DriverError", "RecoverableError"),
    "herder.model": ("Task",),
    "herder.objects": ("EXEC_OUTPUT_LIMIT", "Alloc", "AllocNetwork", "DriverCapabilities", "DriverNetwork",
                       "ExecResult", "ExecSession", "ExecStream", "ExitResult", "Fingerprint", "NetworkDNS",
                       "NetworkIsolation", "TaskEvent", "TaskHandle", "TaskStats"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "EXEC_OUTPUT_LIMIT",
    "Alloc",
    "AllocNetwork",
    "AllocatedPort",
    "CleanupLater",
    "CreatedResources",
    "DriverCapabilities",
    "DriverError",
    "DriverNetwork",
    "ExecResult",
    "ExecSession",
    "ExecStream",
    "ExitResult",
    "Fingerprint",
    "HostMount",
    "NetworkDNS",
    "NetworkIsolation",
    "RecoverableError",
    "Task",
    "TaskContext",
    "TaskDir",
    "TaskEvent",
    "TaskHandle",
    "TaskStats",
    "hookimpl",
]


def __getattr__(name: str) -> Any:
    if name == "hookimpl":
        import pluggy

        value: Any = pluggy.HookimplMarker("herder")
    elif name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
    else:
        raise AttributeError(f"module 'herder' has no attribute {name!r}")
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
