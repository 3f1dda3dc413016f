"""The allocation's hooks in their place around its tasks' scripts, for every front end.

``herder_alloc_prerun`` runs once, before the first task of the allocation
starts; ``herder_alloc_postrun`` once, after the last of its tasks is dead and
cleaned up, and only when prerun was called (a prerun that failed is followed
by postrun all the same: the plugins that got through it may have made
something to undo). :class:`AllocHooks` owns that order: the allocation runner
(:mod:`herder.client.alloc_runner`), the conformance harness
(:mod:`herder.testing.harness`) and the Nomad plugin ask it, none of them calls
the hooks itself.

The allocation runner knows every task of the allocation and waits for them
all: it calls :meth:`AllocHooks.prerun` and :meth:`AllocHooks.postrun` around
them. The Nomad plugin hears of the tasks one by one: it says when each starts
(:meth:`AllocHooks.task_starts`), was recovered (:meth:`AllocHooks.task_recovered`)
and is destroyed (:meth:`AllocHooks.task_ends`), and the count of the tasks
alive in between places the hooks.
"""

from __future__ import annotations

import threading

from herder.objects import Alloc
from herder.plugins.hooks import Hooks


class AllocHooks:
    """The allocation hooks of ``alloc``, each called at most once.

    ``prerun_done``: an earlier process called prerun (the allocation is restored); it is not called again.
    The hooks are passed at each call: a front end may load its plugins again in between.
    """

    def __init__(self, alloc: Alloc, *, prerun_done: bool = False) -> None:
        self.alloc = alloc
        self._lock = threading.Lock()
        self._prerun = prerun_done
        self._postrun = False
        self._live: set[str] = set()

    @property
    def over(self) -> bool:
        """Whether postrun was called: the allocation is done with."""
        return self._postrun

    def prerun(self, hooks: Hooks) -> None:
        """``herder_alloc_prerun``, unless it was called already.

        :raises Exception: what a plugin raised (see :meth:`Hooks.describe_failure`).
        """
        with self._lock:
            if self._prerun:
                return
            self._prerun = True
        hooks.alloc_prerun(self.alloc)

    def postrun(self, hooks: Hooks) -> None:
        """``herder_alloc_postrun``, if prerun was called and postrun not yet.

        :raises Exception: what a plugin raised.
        """
        with self._lock:
            if not self._prerun or self._postrun:
                return
            self._postrun = True
        hooks.alloc_postrun(self.alloc)

    def task_starts(self, hooks: Hooks, key: str) -> None:
        """The task ``key`` is about to start: the allocation's prerun first, if it is the first.

        :raises Exception: what prerun raised (the task is counted all the same: its end calls postrun).
        """
        with self._lock:
            self._live.add(key)
        self.prerun(hooks)

    def task_recovered(self, key: str) -> None:
        """The task ``key``, started by an earlier process, runs on: its allocation's prerun ran then."""
        with self._lock:
            self._live.add(key)
            self._prerun = True

    def task_ends(self, hooks: Hooks, key: str) -> None:
        """The task ``key`` is dead and cleaned up: the allocation's postrun, if it was the last.

        :raises Exception: what postrun raised.
        """
        with self._lock:
            self._live.discard(key)
            last = not self._live
        if last:
            self.postrun(hooks)
