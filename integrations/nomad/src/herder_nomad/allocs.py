"""The allocations of the plugin's tasks, for herder's allocation hooks.

Nomad tells a task driver of tasks only, each in its ``TaskConfig`` with its
allocation's ID, directory, job and group. The plugin counts the tasks of each
allocation it runs (:class:`herder.app.nomad.AllocHooks`): ``herder_alloc_prerun``
before the first of them starts, ``herder_alloc_postrun`` once the last of them
is destroyed (``DestroyTask``, after its cleanup). The ``Alloc`` the hooks get
holds the tasks the plugin heard of so far, not the whole group: the plugin
does not see the tasks of other drivers, nor those not started yet.

A task is counted by its name, which stays the same when Nomad starts it
again: a start that failed with a recoverable error (Nomad starts the task
again, by its restart policy) leaves it counted; any other failed start ends
it, as a destroy would. Should Nomad give up on a task after recoverable
failures, its allocation gets no postrun from the plugin (Nomad does not say
so to a driver).

Across a plugin restart: a task that ``RecoverTask`` gets back was started by
an earlier plugin process, which ran its allocation's prerun; it is counted, and
prerun is not called again (Nomad's task handle, which it keeps in its own
state, is what tells). Its destroy then calls postrun, as for a task started in
this process. An allocation whose tasks all ended while no plugin ran gets no
postrun: Nomad destroys no task it did not recover.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from herder import Alloc, Task
from herder.app.nomad import AllocHooks, Hooks
from herder_nomad.tasks import alloc_index
from herder_nomad.wire import driver_pb2

log = logging.getLogger(__name__)


def build_alloc(config: driver_pb2.TaskConfig) -> Alloc:
    """The allocation of a task as Nomad gives it; its tasks are added as the plugin hears of them."""
    index = alloc_index(config)
    name = config.env.get("NOMAD_ALLOC_NAME") or f"{config.job_name}.{config.task_group_name}[{index}]"
    return Alloc(id=config.alloc_id, name=name, index=index, job_name=config.job_name,
                 group_name=config.task_group_name, dir=Path(config.alloc_dir), tasks=[])


class Allocations:
    """The allocation hooks of every allocation with a task in this plugin process, by allocation ID."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._allocs: dict[str, AllocHooks] = {}

    def _of(self, config: driver_pb2.TaskConfig, task: Task, *, recovered: bool) -> AllocHooks:
        with self._lock:
            hooks = self._allocs.get(config.alloc_id)
            if hooks is None:
                hooks = self._allocs[config.alloc_id] = AllocHooks(build_alloc(config), prerun_done=recovered)
            if all(known.name != task.name for known in hooks.alloc.tasks):
                hooks.alloc.tasks.append(task)
            return hooks

    def starting(self, plugins: Hooks, config: driver_pb2.TaskConfig, task: Task) -> str | None:
        """Before the task of ``config`` starts: its allocation's prerun, if it is the first task. What
        went wrong when prerun failed (the task is then ended: :meth:`destroyed`)."""
        try:
            self._of(config, task, recovered=False).task_starts(plugins, config.name)
        except Exception as exc:
            self.destroyed(plugins, config)
            return plugins.describe_failure("herder_alloc_prerun", exc)
        return None

    def recovered(self, config: driver_pb2.TaskConfig, task: Task) -> None:
        """The task of ``config``, started by an earlier plugin process, runs on: counted, with no prerun."""
        self._of(config, task, recovered=True).task_recovered(config.name)

    def destroyed(self, plugins: Hooks, config: driver_pb2.TaskConfig) -> None:
        """The task of ``config`` is cleaned up (or never started): its allocation's postrun, if it was the
        last. A postrun that fails is logged: Nomad has nothing to tell of it once its task is destroyed."""
        with self._lock:
            hooks = self._allocs.get(config.alloc_id)
        if hooks is None:
            return
        try:
            hooks.task_ends(plugins, config.name)
        except Exception as exc:
            log.warning("allocation %s: %s", config.alloc_id, plugins.describe_failure("herder_alloc_postrun", exc))
        finally:
            if hooks.over:
                with self._lock:
                    self._allocs.pop(config.alloc_id, None)
