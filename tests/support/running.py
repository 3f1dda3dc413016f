"""Running a job in-process, as ``herder run`` does, and collecting its events."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from herder.app import ForegroundRun
from herder.client.alloc_runner import EventRecord
from herder.client.client import JobSource
from herder.client.config import Config, PortsConfig
from herder.client.health import HealthChange
from herder.jobspec import load_job_text
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from tests.support.waiting import TIMEOUT, wait_for


@dataclass
class Run:
    runner: ForegroundRun
    events: list[EventRecord] = field(default_factory=list)
    health: list[HealthChange] = field(default_factory=list)
    status: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, record: EventRecord) -> None:
        with self._lock:
            self.events.append(record)

    def record_health(self, change: HealthChange) -> None:
        with self._lock:
            self.health.append(change)

    def wait_for_health(self, check: str, status: str, timeout: float = TIMEOUT, after: int = 0) -> int:
        """Block until ``check`` turns ``status`` (a change numbered ``after`` or later); its number."""
        def found() -> list[int]:
            with self._lock:
                return [n for n, c in enumerate(self.health) if n >= after and c.check == check and c.status == status]

        def seen() -> str:
            with self._lock:
                changes = [(c.check, c.status, c.output[:80]) for c in self.health]
            return f"check {check!r} to turn {status}; health changes {changes}, events {self.types()}"

        return wait_for(found, timeout, seen)[0]

    def types(self, task: str | None = None) -> list[str]:
        """Event types in order, of one task or of all."""
        with self._lock:
            return [r.event.type for r in self.events if task is None or r.task == task]

    def wait_for(self, type: str, task: str | None = None, timeout: float = TIMEOUT) -> EventRecord:
        """Block until an event of ``type`` arrives (polling the recorded list)."""
        def found() -> list[EventRecord]:
            with self._lock:
                return [r for r in self.events if r.event.type == type and (task is None or r.task == task)]

        return wait_for(found, timeout, lambda: f"a {type!r} event of {task or 'any task'}; events {self.types()}")[0]


def make_config(data_dir: Path, plugin: dict[str, dict[str, object]] | None = None) -> Config:
    """A configuration for tests: its own data dir, ports from 2000-12000."""
    return Config(data_dir=data_dir, ports=PortsConfig(min=2000, max=12000), plugin=plugin or {})


def start_job(text: str, data_dir: Path, *, fmt: str = "hcl", config: Config | None = None,
              hooks: Hooks | None = None) -> tuple[Run, Callable[..., str]]:
    """Place the job and run it in a thread; returns the run and a function that waits for its status."""
    config = config or make_config(data_dir)
    hooks = hooks or Hooks(load_plugins(config.plugin, config.disabled_plugins))
    job = load_job_text(text, fmt, f"job.{fmt}")
    source = JobSource(text=text, format=fmt, source=f"job.{fmt}")
    run = Run(runner=ForegroundRun(config, hooks, job, source, on_event=lambda r: run.record(r),
                                   on_health=lambda c: run.record_health(c)))
    try:
        run.runner.place()
    except BaseException:
        run.runner.close()
        raise
    result: list[str] = []

    def background() -> None:
        try:
            result.append(run.runner.run())
        finally:
            run.runner.close()

    thread = threading.Thread(target=background, daemon=True)
    thread.start()

    def wait(timeout: float = 60.0) -> str:
        thread.join(timeout)
        assert not thread.is_alive(), f"job still running after {timeout}s: {run.types()}"
        run.status = result[0]
        return run.status

    return run, wait


def run_job(text: str, data_dir: Path, *, fmt: str = "hcl", config: Config | None = None,
            hooks: Hooks | None = None, timeout: float = 60.0) -> Run:
    """Run a job to the end."""
    run, wait = start_job(text, data_dir, fmt=fmt, config=config, hooks=hooks)
    wait(timeout)
    return run
