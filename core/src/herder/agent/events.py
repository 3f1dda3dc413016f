"""The agent's task events and check changes: logged, and the events kept for the event stream."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter, deque
from typing import Any

from herder.client.alloc_runner import EventRecord
from herder.client.health import HealthChange
from herder.presentation import event_json

log = logging.getLogger("herder.agent")

EVENT_BUFFER = 10_000
"""How many recent events the event stream can replay."""


class EventLog:
    """Every task event in the documented JSON shape, numbered; the last
    :data:`EVENT_BUFFER` are kept for ``GET /v1/events``. Thread-safe."""

    def __init__(self) -> None:
        self._events: deque[tuple[int, dict[str, Any]]] = deque(maxlen=EVENT_BUFFER)
        self._seq = 0
        self._by_type: Counter[str] = Counter()  # every event since the agent started, forgotten or not
        self._changed = threading.Condition()

    def record(self, record: EventRecord) -> None:
        event = event_json(record)
        log.info("%s %s: %s %s", record.alloc_name, record.task, event["type"], event["message"])
        with self._changed:
            self._seq += 1
            self._events.append((self._seq, event))
            self._by_type[event["type"]] += 1
            self._changed.notify_all()

    def counts(self) -> dict[str, int]:
        """How many events of each type there were since the agent started."""
        with self._changed:
            return dict(self._by_type)

    @property
    def last(self) -> int:
        """The number of the latest event."""
        return self._seq

    def forget(self, alloc_ids: list[str]) -> None:
        """Drop the events of allocations the garbage collector removed."""
        gone = set(alloc_ids)
        with self._changed:
            kept = [(n, e) for n, e in self._events if e["alloc_id"] not in gone]
            self._events = deque(kept, maxlen=EVENT_BUFFER)

    def after(self, seq: int, alloc_id: str | None = None) -> tuple[int, list[dict[str, Any]]]:
        """The events after number ``seq`` (of one allocation), and the last number."""
        with self._changed:
            last = self._seq
            found = [(n, e) for n, e in self._events if n > seq and (alloc_id is None or e["alloc_id"] == alloc_id)]
        return last, [e | {"index": n} for n, e in found]

    def wait(self, seq: int, timeout: float) -> None:
        """Block until there is an event after ``seq``, or ``timeout`` passed."""
        with self._changed:
            self._changed.wait_for(lambda: self._seq > seq, timeout)


def log_health(change: HealthChange) -> None:
    log.info("%s %s: check %s of service %s is %s", change.alloc_name, change.task, change.check,
             change.service, change.status)


def sse(event: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"id: {event['index']}\nevent: task-event\ndata: {json.dumps(event)}\n\n"
