"""``herder run --logs``: the tasks' output, line by line, beside their events."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from herder.client.alloc_runner import AllocRunner
from herder.client.logtail import LogTail

POLL_INTERVAL = 0.2


class TaskOutput:
    """Polls every task's log files and passes each complete line to ``show(prefix, line)``.

    ``allocs`` is read at each poll: allocations added to it meanwhile (a failed one's
    replacement, a periodic job's child) are followed from then on."""

    def __init__(self, allocs: Sequence[AllocRunner], show: Callable[[str, str], None]) -> None:
        self._show = show
        self._allocs = allocs
        self._followed: set[str] = set()
        self._tails: list[tuple[str, LogTail]] = []
        self._follow_new()
        self._partial: dict[str, bytes] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="task-output", daemon=True)

    def __enter__(self) -> TaskOutput:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read(final=True)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_INTERVAL):
            self._read(final=False)

    def _follow_new(self) -> None:
        for alloc in list(self._allocs):
            if alloc.alloc.id in self._followed:
                continue
            self._followed.add(alloc.alloc.id)
            for task in alloc.tasks:
                for stream in ("stdout", "stderr"):
                    prefix = f"{alloc.alloc.name} {task.name}" + (" (stderr)" if stream == "stderr" else "")
                    self._tails.append((prefix, LogTail(task.ctx.task_dir.logs_dir, task.name, stream)))

    def _read(self, final: bool) -> None:
        self._follow_new()
        for prefix, tail in self._tails:
            data = self._partial.pop(prefix, b"") + tail.read()
            *lines, rest = data.split(b"\n")
            if rest and final:
                lines.append(rest)
            elif rest:
                self._partial[prefix] = rest
            for line in lines:
                self._show(prefix, line.decode("utf-8", "replace"))
