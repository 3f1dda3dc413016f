"""The views of ``herder run``: the live table's progress bars and health, and the JSON line shapes."""

from __future__ import annotations

import io
import json

from rich.console import Console

from herder.cli.render import LiveTable, event_json, health_json
from herder.client.alloc_runner import EventRecord
from herder.client.health import HealthChange
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


def change(check: str, status: str) -> HealthChange:
    return HealthChange("a1", "web.app[0]", "server", "web", check, status, f"{check} said {status}")


def test_the_live_table_has_a_health_line_per_check_that_follows_its_status() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=True, color_system=None)
    with LiveTable(console) as view:
        view.show(record("Started", "Task started by client"))
        view.health(change("index", "critical"))
        view.health(change("alive", "passing"))
        view.health(change("index", "passing"))
    last_table = out.getvalue().rsplit("Health", 1)[-1]
    assert "web/alive passing" in last_table and "web/index passing" in last_table
    assert "critical" not in last_table


def test_health_json_shape() -> None:
    line = health_json(change("index", "warning"))
    assert set(line) == {"time", "alloc_id", "alloc_name", "task", "check"}
    assert line["check"] == {"service": "web", "name": "index", "status": "warning", "output": "index said warning"}
    assert line["time"].endswith("Z")
