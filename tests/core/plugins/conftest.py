"""Fixtures installing the recording plugins of ``tests/support/testplugins.py``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

SOURCE = (Path(__file__).resolve().parents[2] / "support" / "testplugins.py").read_text()


class HookLog:
    """The JSON lines the recording plugins wrote."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def calls(self, *, skip_events: bool = True) -> list[tuple[str, str]]:
        """(hook, kind) in call order; events, fingerprints and schemas only when asked."""
        quiet = ("herder_task_event", "herder_driver_fingerprint", "herder_driver_task_schema")
        return [(e["hook"], e["kind"]) for e in self.entries() if not (skip_events and e["hook"] in quiet)]


@pytest.fixture
def recording(install: Callable[..., Path], tmp_path: Path) -> HookLog:
    """Install distribution ``herder-testplugins``: lifecycle plugin ``recorder`` and driver ``recdriver``."""
    install("herder-testplugins", "1.2.3",
            {"herder.plugins": {"recorder": "herder_testplugins:Recorder"},
             "herder.drivers": {"recdriver": "herder_testplugins:RecordingDriver"}},
            {"herder_testplugins.py": SOURCE})
    return HookLog(tmp_path / "hooks.jsonl")


def plugin_config(log: HookLog, **recorder: Any) -> dict[str, dict[str, Any]]:
    """``[plugin.recorder]`` and ``[plugin.recdriver]`` tables writing to ``log``."""
    return {"recorder": {"log": str(log.path), **recorder}, "recdriver": {"log": str(log.path)}}
