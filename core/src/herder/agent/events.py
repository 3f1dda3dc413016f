"""The agent's task events, allocations' ends and check changes: logged, and the events
and ends kept for the event stream."""

from __future__ import annotations

import json
import logging
import threading
from collections import Counter, deque
from typing import Any

from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.health import HealthChange
from herder.presentation import event_json

log = logging.getLogger("herder.agent")

EVENT_BUFFER = 10_000
"""How many recent events the event stream can replay."""

TASK_EVENT = "task-event"
ALLOC_STATUS = "alloc-status"
"""The kinds of entry in the event stream: a task's event, and an allocation's
final status as the client decided it, once every task is dead and cleaned up."""


class EventLog:
    """Every task event in the documented JSON shape and every allocation's end,
    numbered in one sequence; the last :data:`EVENT_BUFFER` are kept for
    ``GET /v1/events``. Thread-safe."""

    def __init__(self) -> None:
        self._events: deque[tuple[int, str, dict[str, Any]]] = deque(maxlen=EVENT_BUFFER)
        self._seq = 0
        self._by_type: Counter[str] = Counter()  # every event since the agent started, forgotten or not
        self._changed = threading.Condition()

    def record(self, record: EventRecord) -> None:
        event = event_json(record)
        log.info("%s %s: %s %s", record.alloc_name, record.task, event["type"], event["message"])
        self._add(TASK_EVENT, event)
        with self._changed:
            self._by_type[event["type"]] += 1

    def ended(self, alloc: AllocRunner) -> None:
        """Record that every task of ``alloc`` is dead and cleaned up, with the status the
        client gave it: what a follower of the stream waits for, so that it need not ask."""
        self._add(ALLOC_STATUS, {"alloc_id": alloc.alloc.id, "alloc_name": alloc.alloc.name,
                                 "status": alloc.status})

    def _add(self, kind: str, entry: dict[str, Any]) -> None:
        with self._changed:
            self._seq += 1
            self._events.append((self._seq, kind, entry))
            self._changed.notify_all()

    def counts(self) -> dict[str, int]:
        """How many events of each type there were since the agent started."""
        with self._changed:
            return dict(self._by_type)

    @property
    def last(self) -> int:
        """The number of the latest entry."""
        return self._seq

    def forget(self, alloc_ids: list[str]) -> None:
        """Drop the events of allocations the garbage collector removed."""
        gone = set(alloc_ids)
        with self._changed:
            kept = [(n, k, e) for n, k, e in self._events if e["alloc_id"] not in gone]
            self._events = deque(kept, maxlen=EVENT_BUFFER)

    def after(self, seq: int, alloc_id: str | None = None, *,
              ends: bool = False) -> tuple[int, list[tuple[str, dict[str, Any]]]]:
        """The task events after number ``seq`` (of one allocation), with the allocations' ends
        if ``ends``, each with its kind; and the last number."""
        kinds = (TASK_EVENT, ALLOC_STATUS) if ends else (TASK_EVENT,)
        with self._changed:
            last = self._seq
            found = [(n, k, e) for n, k, e in self._events
                     if n > seq and k in kinds and (alloc_id is None or e["alloc_id"] == alloc_id)]
        return last, [(k, e | {"index": n}) for n, k, e in found]

    def wait(self, seq: int, timeout: float) -> None:
        """Block until there is an entry after ``seq``, or ``timeout`` passed."""
        with self._changed:
            self._changed.wait_for(lambda: self._seq > seq, timeout)


def log_health(change: HealthChange) -> None:
    log.info("%s %s: check %s of service %s is %s", change.alloc_name, change.task, change.check,
             change.service, change.status)


def sse(kind: str, entry: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"id: {entry['index']}\nevent: {kind}\ndata: {json.dumps(entry)}\n\n"
