"""herder-eventlog: an example third-party lifecycle plugin.

It appends every task event, as one JSON line, to a file, and tells each task
where that file is through ``HERDER_EVENTLOG``. Configuration (in herder's
TOML configuration file)::

    [plugin.eventlog]
    path = "/var/log/herder-events.jsonl"   # default: events.jsonl in the data dir's parent

Install it beside herder (``pip install ./examples/plugin``) and it takes part
in every run; ``herder plugins`` lists it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from herder import Task, TaskContext, TaskEvent, hookimpl


class EventLog:
    """The plugin object; herder calls the class with the ``[plugin.eventlog]`` table."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.path = Path(config.get("path", "herder-events.jsonl")).absolute()
        self._lock = threading.Lock()

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        ctx.env["HERDER_EVENTLOG"] = str(self.path)

    @hookimpl
    def herder_task_event(self, task: Task, ctx: TaskContext, event: TaskEvent) -> None:
        line = json.dumps({"time": event.time.isoformat(), "alloc_id": ctx.alloc_id, "task": task.name,
                           "type": event.type, "message": event.message})
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
