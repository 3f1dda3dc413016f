"""How ``herder run`` shows task events: a live table, plain lines, or JSON lines."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TextIO

from rich.console import Console, RenderableType
from rich.console import Group as RichGroup
from rich.live import Live
from rich.markup import escape
from rich.progress_bar import ProgressBar
from rich.table import Table

from herder import events
from herder.app import HealthLog
from herder.cli.common import event_line
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.health import HealthChange
from herder.presentation import event_json, rfc3339

_STATE_STYLE = {"pending": "yellow", "running": "green", "dead": "dim"}
_HEALTH_STYLE = {"passing": "green", "warning": "yellow", "critical": "red"}


def health_json(change: HealthChange) -> dict[str, Any]:
    """A service check's status change in the documented ``herder run --json`` shape."""
    return {"time": rfc3339(datetime.now(UTC)), "alloc_id": change.alloc_id, "alloc_name": change.alloc_name,
            "task": change.task, "check": {"service": change.service, "name": change.check,
                                           "status": change.status, "output": change.output}}


def summary(status: str, allocs: Iterable[AllocRunner], health: HealthLog | None = None) -> dict[str, Any]:
    """The ``herder run --json`` summary (docs/user-guide.md)."""
    health = health or HealthLog()
    return {"status": status, "allocs": {
        a.alloc.id: {"name": a.alloc.name, "tasks": {
            t.name: {"state": t.status.state, "failed": t.status.failed, "restarts": t.status.restarts,
                     "exit_code": t.status.exit_code, "checks": health.checks(a.alloc.id, t.name)}
            for t in a.tasks}}
        for a in allocs}}


class EventView(Protocol):
    """A way of showing events; used as a context manager around the run."""

    def __enter__(self) -> EventView: ...
    def __exit__(self, *exc: object) -> None: ...
    def show(self, record: EventRecord) -> None: ...
    def health(self, change: HealthChange) -> None: ...
    def message(self, text: str) -> None: ...
    def output(self, prefix: str, line: str) -> None: ...


class _Lines:
    """Events as lines on a stream; ``--json`` prints JSON objects instead."""

    def __init__(self, stream: TextIO, as_json: bool, messages: TextIO) -> None:
        self.stream = stream
        self.as_json = as_json
        self.messages = messages
        self._lock = threading.Lock()

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stream.flush()

    def show(self, record: EventRecord) -> None:
        event = event_json(record)
        text = json.dumps(event) if self.as_json else event_line(event)
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def health(self, change: HealthChange) -> None:
        if self.as_json:
            text = json.dumps(health_json(change))
        else:
            text = (f"{rfc3339(datetime.now(UTC))} {change.alloc_name} {change.task} Check "
                    f"{change.service}/{change.check}: {change.status}")
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def message(self, text: str) -> None:
        with self._lock:
            self.messages.write(text + "\n")
            self.messages.flush()

    def output(self, prefix: str, line: str) -> None:
        """A line of task output: on stdout, or on stderr with ``--json``."""
        stream = self.messages if self.as_json else self.stream
        with self._lock:
            stream.write(f"{prefix} | {line}\n")
            stream.flush()


@dataclass
class _Row:
    state: str = "pending"
    restarts: int = 0
    event: str = ""
    progress: tuple[int, int] | None = None  # (current, total) bytes of a download
    checks: dict[str, str] = field(default_factory=dict)  # "service/check" -> status


class LiveTable:
    """On a terminal: events scroll above a live table of every task's state.

    ``Driver`` events carrying ``progress`` (``{"current", "total"}`` bytes,
    as image pulls and artifact downloads report) show as a progress bar in
    the table instead of scrolling by.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._rows: dict[tuple[str, str], _Row] = {}
        self._lock = threading.Lock()
        self._live = Live(self._render(), console=console, refresh_per_second=8, transient=False)

    def __enter__(self) -> LiveTable:
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._live.update(self._render())
        self._live.__exit__(None, None, None)

    def show(self, record: EventRecord) -> None:
        event = record.event
        progress = event.details.get("progress") or {}
        with self._lock:
            row = self._rows.setdefault((record.alloc_name, record.task), _Row())
            row.event = f"{event.type}: {event.message}" if event.message else event.type
            row.progress = (int(progress.get("current", 0)), int(progress["total"])) if "total" in progress else None
            if event.type in (events.STARTED, events.REATTACHED):
                row.state = "running"
            elif event.type == events.RESTARTING:
                row.restarts += 1
                row.state = "pending"
            elif event.type in (events.TERMINATED, events.KILLED, events.NOT_RESTARTING):
                row.state = "dead" if event.type != events.TERMINATED else "exited"
            if row.progress is None:
                style = "red" if event.type in events.FAILURES else "cyan"
                self.console.print(f"[dim]{event.time:%H:%M:%S}[/] [bold]{escape(record.alloc_name)}[/] "
                                   f"{escape(record.task)} [{style}]{event.type}[/] {escape(event.message)}",
                                   highlight=False)
            self._live.update(self._render(), refresh=True)

    def health(self, change: HealthChange) -> None:
        with self._lock:
            row = self._rows.setdefault((change.alloc_name, change.task), _Row())
            row.checks[f"{change.service}/{change.check}"] = change.status
            self._live.update(self._render(), refresh=True)

    def message(self, text: str) -> None:
        self.console.print(escape(text), highlight=False)

    def output(self, prefix: str, line: str) -> None:
        self.console.print(f"[bold]{escape(prefix)}[/] | {escape(line)}", highlight=False)

    def _render(self) -> Table:
        table = Table(expand=False, title=None, show_edge=True)
        for column in ("Allocation", "Task", "State", "Restarts", "Health", "Last event"):
            table.add_column(column, overflow="fold")
        for (alloc, task), row in sorted(self._rows.items()):
            last: RenderableType = escape(row.event)
            if row.progress is not None:
                current, total = row.progress
                last = RichGroup(escape(row.event), ProgressBar(total=max(total, 1), completed=current, width=30))
            health = "\n".join(f"{escape(name)} [{_HEALTH_STYLE.get(status, 'white')}]{status}[/]"
                               for name, status in sorted(row.checks.items()))
            table.add_row(escape(alloc), escape(task), f"[{_STATE_STYLE.get(row.state, 'white')}]{row.state}[/]",
                          str(row.restarts), health, last)
        return table


def make_view(as_json: bool) -> EventView:
    """JSON lines on stdout with ``--json``; a live table on a terminal; plain lines otherwise."""
    if as_json:
        return _Lines(sys.stdout, as_json=True, messages=sys.stderr)
    if sys.stdout.isatty():
        return LiveTable(Console(stderr=False))
    return _Lines(sys.stdout, as_json=False, messages=sys.stderr)
