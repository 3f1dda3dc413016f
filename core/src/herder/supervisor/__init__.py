"""The process supervisor: one per data dir, owning the processes of its tasks.

It outlives the herder process that started it: it moves the tasks' output
into the rotating log files, records their exits and takes signals, so that a
new herder process can attach to the tasks again. :class:`Supervisor` is a
herder process's connection to it; the daemon itself
(``python -m herder.supervisor DATA_DIR``) is :mod:`herder.supervisor.server`.
"""

from __future__ import annotations

from herder.supervisor.client import (
    ExitInfo,
    Figures,
    ProcInfo,
    ProcStatus,
    Supervisor,
    SupervisorError,
    SupervisorUnavailable,
)

__all__ = ["ExitInfo", "Figures", "ProcInfo", "ProcStatus", "Supervisor", "SupervisorError", "SupervisorUnavailable"]
