"""Cleanup steps that a plugin asked to finish later (:class:`herder.CleanupLater`).

Each is a row of the state database, so it is never lost: this process runs
it when due, and if this process ends first, the next herder on the data dir
runs it (when due, or at once if overdue) as soon as it starts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import cast

from herder.client.background import Background
from herder.client.lifecycle import cleanup_step
from herder.context import TaskContext
from herder.errors import RecoverableError
from herder.model import Task
from herder.plugins.hooks import Hooks, Participants
from herder.state import Deferred, Store

log = logging.getLogger(__name__)

KIND = "cleanup"

Rebuild = Callable[[str, str], "tuple[Task, TaskContext] | None"]
"""The task and a context for it, from the stored allocation (None when it is gone)."""


class DeferredCleanups:
    """Runs due cleanup steps in a thread of its own."""

    def __init__(self, store: Store, hooks: Hooks, rebuild: Rebuild) -> None:
        self.store = store
        self.hooks = hooks
        self._rebuild = rebuild
        self._background = Background("deferred-cleanups", self._step)
        self._stopped = self._background.stopped

    def add(self, alloc_id: str, task: str, phase: Participants, delay: float) -> None:
        """Call ``phase`` of the task's cleanup (the step of those taking part) again in ``delay`` seconds."""
        self.store.defer(Deferred(kind=KIND, key=f"{alloc_id}/{task}/{phase}", due=time.time() + delay,
                                  payload={"alloc_id": alloc_id, "task": task, "phase": phase}), wait=False)
        self._background.wake()

    def start(self) -> None:
        self._background.start()

    def stop(self) -> None:
        """Stop the thread; what is not due yet stays stored for the next herder."""
        self._background.stop()

    def _step(self) -> float | None:
        """Run what is due; the seconds until the next is (None: nothing is pending)."""
        self.run_due()
        pending = self.store.deferred(KIND)
        return max(0.0, min(work.due for work in pending) - time.time()) if pending else None

    def run_due(self) -> None:
        """Run every cleanup step that is due now."""
        for work in self.store.due(time.time()):
            if work.kind == KIND and not self._stopped.is_set():
                self._run(work)

    def _run(self, work: Deferred) -> None:
        alloc_id, task_name = str(work.payload["alloc_id"]), str(work.payload["task"])
        phase = cast(Participants, work.payload["phase"])
        rebuilt = self._rebuild(alloc_id, task_name)
        if rebuilt is not None:
            task, ctx = rebuilt
            try:
                later = cleanup_step(self.hooks, task, ctx, phase, self._stopped)
                if later is not None:
                    self.add(alloc_id, task_name, phase, later.delay)
                    return
            except Exception as exc:
                if isinstance(exc, RecoverableError) and self._stopped.is_set():
                    return  # its retries were cut short by the stop: the next herder tries again
                log.warning("deferred cleanup of task %s of allocation %s: %s", task_name, alloc_id,
                            self.hooks.describe_failure("herder_task_cleanup", exc))
        self.store.done(work.kind, work.key, wait=False)
