"""The client's durable state, in SQLite under the data dir.

A low layer: it knows records and SQL, not runners or drivers.
:class:`Store` opens ``<data_dir>/state.db``; the records are what it stores.
Its commit engine is :mod:`herder.state.database`, its tables'
statements :mod:`herder.state.tables`.
"""

from __future__ import annotations

from herder.state.database import BUSY_TIMEOUT, StateError
from herder.state.records import (
    LIVE_STATUSES,
    AllocRecord,
    AllocStatus,
    Deferred,
    DeploymentRecord,
    DeploymentStatus,
    DesiredStatus,
    JobRecord,
    NetworkRecord,
    ParentRecord,
    ParentStatus,
    PortRecord,
    PreviousRecord,
    TaskRecord,
    TaskState,
    VersionRecord,
    job_id,
)
from herder.state.store import Store
from herder.state.tables.events import EVENTS_KEPT

__all__ = [
    "BUSY_TIMEOUT",
    "EVENTS_KEPT",
    "LIVE_STATUSES",
    "AllocRecord",
    "AllocStatus",
    "Deferred",
    "DeploymentRecord",
    "DeploymentStatus",
    "DesiredStatus",
    "JobRecord",
    "NetworkRecord",
    "ParentRecord",
    "ParentStatus",
    "PortRecord",
    "PreviousRecord",
    "StateError",
    "Store",
    "TaskRecord",
    "TaskState",
    "VersionRecord",
    "job_id",
]
