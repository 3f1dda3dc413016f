"""Cleanup steps that a plugin asked to finish later (:class:`herder.CleanupLater`).

Every front end with a data dir keeps them here: the agent and ``herder run``
(through :class:`herder.client.client.Client`) and the Nomad plugin. Each is a
row of the state database, so it is never lost: this process runs it when
due, and if this process ends first, the next one on the data dir runs it
(when due, or at once if overdue) as soon as it starts. :meth:`DeferredCleanups.finish`
runs, before the process ends, the steps already due without waiting for the
others (``herder run``'s last act).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from herder.background import Background
from herder.client.lifecycle import cleanup_step
from herder.context import TaskContext
from herder.errors import RecoverableError
from herder.model import Task
from herder.plugins.hooks import Hooks, Participants
from herder.state import Deferred, Store

log = logging.getLogger(__name__)

KIND = "cleanup"

Rebuild = Callable[[Mapping[str, Any]], "tuple[Task, TaskContext] | None"]
"""The task and a context for it, from a step's stored payload (None when it is gone)."""


class DeferredCleanups:
    """Runs due cleanup steps in a thread of its own; ``rebuild`` makes each step's task and context
    again from what :meth:`add` stored."""

    def __init__(self, store: Store, hooks: Hooks, rebuild: Rebuild) -> None:
        self.store = store
        self.hooks = hooks
        self._rebuild = rebuild
        self._background = Background("deferred-cleanups", self._step)
        self._interrupt = threading.Event()
        """Set by :meth:`stop`: a step's retries end, and no more steps run."""

    def add(self, alloc_id: str, task: str, phase: Participants, delay: float, *, key: str = "",
            extra: Mapping[str, Any] | None = None) -> None:
        """Call ``phase`` of the task's cleanup (the step of those taking part) again in ``delay`` seconds.

        ``key`` tells the task apart where its allocation and name do not (a Nomad task
        restarted within its allocation has an ID of each run); ``extra`` is more of what
        the ``rebuild`` function needs, stored with the step (it must be JSON).
        """
        payload = {**(extra or {}), "alloc_id": alloc_id, "task": task, "phase": phase}
        self._defer(f"{key or f'{alloc_id}/{task}'}/{phase}", payload, delay)

    def _defer(self, key: str, payload: Mapping[str, Any], delay: float) -> None:
        self.store.defer(Deferred(kind=KIND, key=key, due=time.time() + delay, payload=dict(payload)), wait=False)
        self._background.wake()

    def start(self) -> None:
        self._background.start()

    def stop(self) -> None:
        """Stop the thread, cutting short the retries of a step under way; what is not done
        stays stored for the next process on the data dir."""
        self._interrupt.set()
        self._background.stop()

    def finish(self) -> None:
        """Stop the thread once its step under way is done, then run, in this thread, every
        step due by now; those not due yet stay stored for the next process on the data dir."""
        self._background.stop()
        self.run_due()
        self.stop()

    def _step(self) -> float | None:
        """Run what is due; the seconds until the next is (None: nothing is pending)."""
        self.run_due()
        pending = self.store.deferred(KIND)
        return max(0.0, min(work.due for work in pending) - time.time()) if pending else None

    def run_due(self) -> None:
        """Run every cleanup step that is due now."""
        for work in self.store.due(time.time()):
            if work.kind == KIND and not self._interrupt.is_set():
                self._run(work)

    def _run(self, work: Deferred) -> None:
        alloc_id, task_name = str(work.payload["alloc_id"]), str(work.payload["task"])
        phase = cast(Participants, work.payload["phase"])
        rebuilt = self._rebuild(work.payload)
        if rebuilt is not None:
            task, ctx = rebuilt
            try:
                later = cleanup_step(self.hooks, task, ctx, phase, self._interrupt)
                if later is not None:
                    self._defer(work.key, work.payload, later.delay)
                    return
            except Exception as exc:
                if isinstance(exc, RecoverableError) and self._interrupt.is_set():
                    return  # its retries were cut short by the stop: the next process tries again
                log.warning("deferred cleanup of task %s of allocation %s: %s", task_name, alloc_id,
                            self.hooks.describe_failure("herder_task_cleanup", exc))
        self.store.done(work.kind, work.key, wait=False)
