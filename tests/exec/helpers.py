"""Helpers for the exec driver's tests: runc as the tests see it, job documents."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for

try:
    from herder_exec.runc import Runc
except ImportError:  # the fixtures skip (or fail, under HERDER_REQUIRE) before any helper needs it
    Runc = None  # type: ignore[assignment, misc]


def runc() -> Runc:
    """runc from PATH, with its default state directory, as the driver's default configuration uses it."""
    assert Runc is not None, "herder-exec is not installed"
    return Runc(shutil.which("runc") or "runc")


def containers() -> list[dict[str, Any]]:
    """``runc list``: every container runc knows."""
    if shutil.which("runc") is None:
        return []
    tried: list[str] = []

    def listing() -> subprocess.CompletedProcess[str] | None:
        done = subprocess.run(["runc", "list", "--format", "json"], capture_output=True, text=True, timeout=30)
        tried.append(done.stderr.strip())
        return done if done.returncode == 0 else None

    # runc fails a listing when a container it lists is removed meanwhile (another test's): list again.
    done = wait_for(listing, what=lambda: f"a listing of runc's containers: {tried[-1]}")
    return json.loads(done.stdout or "null") or []


def containers_under(path: Path) -> list[str]:
    """The ids of the containers whose bundle is under ``path``."""
    return [c["id"] for c in containers() if str(c.get("bundle", "")).startswith(str(path))]


def sh(script: str) -> dict[str, Any]:
    """An exec task config running ``/bin/sh -c SCRIPT``."""
    return {"command": "/bin/sh", "args": ["-c", script]}


def job(config: dict[str, Any], *, name: str | None = None, memory: int = 64,
        ports: list[dict[str, Any]] | None = None, **task: Any) -> dict[str, Any]:
    """A canonical batch job document: one group, one exec task ``t``, failing at its first exit."""
    return {"job": {
        "name": name or f"exec-{uuid.uuid4().hex[:8]}", "type": "batch",
        "groups": [{
            "name": "g",
            "restart": {"attempts": 0, "interval": "1m", "delay": "0s", "mode": "fail"},
            "tasks": [{"name": "t", "driver": "exec", "config": config,
                       "resources": {"cpu": 100, "memory": memory, "network": {"ports": ports or []}}, **task}],
        }],
    }}
