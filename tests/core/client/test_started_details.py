"""The ``Started`` event carries what the handle tells of how its task runs (``started_details``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from herder.client.script import started_details
from tests.support.running import start_job


def test_a_handles_started_details_are_copied() -> None:
    details = {"isolation": "exec", "description": "in a container"}
    handle = SimpleNamespace(id="x", started_details=details)
    copied = started_details(handle)  # type: ignore[arg-type]
    assert copied == details and copied is not details


def test_a_handle_without_them_or_with_something_else_gives_none() -> None:
    assert started_details(SimpleNamespace(id="x")) == {}  # type: ignore[arg-type]
    assert started_details(SimpleNamespace(id="x", started_details="in a container")) == {}  # type: ignore[arg-type]


def test_raw_execs_started_event_has_no_details(data_dir: Path) -> None:
    job = 'job "j" {\n type = "batch"\n group "g" {\n task "t" {\n driver = "raw_exec"\n' \
          ' config {\n command = "true"\n }\n }\n }\n}\n'
    run, wait = start_job(job, data_dir)
    assert wait() == "complete"
    [started] = [record.event for record in run.events if record.event.type == "Started"]
    assert (started.message, started.details) == ("Task started by client", {})
