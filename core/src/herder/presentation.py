"""The JSON shapes both front ends write: the command line's ``herder run --json``
and the agent's API and event stream (docs/user-guide.md)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from herder.client.alloc_runner import EventRecord


def rfc3339(time: datetime) -> str:
    return time.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def event_json(record: EventRecord) -> dict[str, Any]:
    """One event in the documented ``herder run --json`` shape."""
    event = record.event
    return {"time": rfc3339(event.time), "alloc_id": record.alloc_id, "alloc_name": record.alloc_name,
            "task": record.task, "type": event.type, "message": event.message,
            "details": json.loads(json.dumps(event.details, default=str))}
