"""The views of ``herder run``: the live table's progress bars and the JSON line shape."""

from __future__ import annotations

import io
import json

from rich.console import Console

from herder.cli.render import LiveTable, event_json
from herder.client.alloc_runner import EventRecord
from herder.objects import TaskEvent


def record(type: str, message: str = "", **details: object) -> EventRecord:
    return EventRecord("a1", "web.app[0]", "server", TaskEvent(type, message, dict(details)))


def test_download_progress_is_a_bar_not_a_scrolling_line() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    with LiveTable(console) as view:
        view.show(record("Driver", "Downloading image busybox:1", image="busybox:1", progress={}))
        view.show(record("Driver", "Downloading image busybox:1: 5.0 of 10.0 MB", image="busybox:1",
                         progress={"current": 5_000_000, "total": 10_000_000}))
        assert "5.0 of 10.0 MB" in out.getvalue()
        assert "━━━━━━━━━━━━━━━" in out.getvalue().split("5.0 of 10.0 MB")[-1]  # the bar under the message
        view.show(record("Started", "Task started by client"))
    text = out.getvalue()
    scrolled = [line for line in text.splitlines() if "Driver" in line and "│" not in line]
    assert len(scrolled) == 1 and "5.0 of 10.0" not in scrolled[0]


def test_event_json_shape() -> None:
    line = event_json(record("Terminated", "Exit Code: 0", exit_code=0, when=object()))
    assert set(line) == {"time", "alloc_id", "alloc_name", "task", "type", "message", "details"}
    assert line["time"].endswith("Z")
    assert line["details"]["exit_code"] == 0
    json.dumps(line)  # every detail is serialisable, even objects (as strings)
