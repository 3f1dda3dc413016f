"""``herder run --json`` in a subprocess, its events read as they come."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.waiting import poll


class HerderRun:
    """A ``herder run --json`` process; ``events`` (and ``checks``, the check status
    changes) fill from its stdout in the background."""

    def __init__(self, job: Path, data_dir: Path, *args: str, config: Path | None = None) -> None:
        argv = [sys.executable, "-m", "herder", "run", "--json", "--data-dir", str(data_dir), *args, str(job)]
        if config is not None:
            argv[4:4] = ["--config", str(config)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.events: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []
        self.summary: dict[str, Any] | None = None
        self._stderr: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            record = json.loads(line)
            with self._lock:
                if "summary" in record:
                    self.summary = record["summary"]
                elif "check" in record:
                    self.checks.append(record)
                else:
                    self.events.append(record)

    def of(self, type: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["type"] == type]

    def wait_for(self, type: str, count: int = 1, timeout: float = 120.0) -> list[dict[str, Any]]:
        """The first ``count`` events of ``type``, once there are that many (failing at once if herder ended)."""
        def enough_or_ended() -> bool:
            return len(self.of(type)) >= count or (self.proc.poll() is not None and not self._reader.is_alive())

        poll(enough_or_ended, timeout)
        found = self.of(type)
        if len(found) < count:
            raise AssertionError(f"{len(found)} of {count} {type!r} events; stderr: {self.finish(kill=True)}")
        return found[:count]

    def kill(self) -> None:
        """SIGKILL: herder dies at once, without stopping anything."""
        self.proc.kill()
        self.finish()

    def interrupt(self) -> int:
        """Ctrl-C, and wait for herder to stop every task and exit; its exit code."""
        self.proc.send_signal(signal.SIGINT)
        self.finish()
        return self.proc.returncode

    def finish(self, timeout: float = 60.0, kill: bool = False) -> str:
        """Wait for the process to exit (killing it first with ``kill``); its stderr."""
        if kill and self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout)
        self._reader.join(5)
        self._stderr_reader.join(5)
        return self.stderr


def task_dirs(data_dir: Path, task: str) -> list[Path]:
    """Every task directory of ``task`` under the data dir."""
    return sorted((data_dir / "allocs").glob(f"*/{task}"))
