"""The one typed facade through which the core calls hooks.

Core code never touches ``pm.hook``: it calls methods of :class:`Hooks`, which
choose the plugins taking part (a driver only ever sees its own tasks), call
them in the documented order and turn failures of observer hooks into
``Task hook failed`` events.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Literal

from herder.context import TaskContext
from herder.errors import DriverError
from herder.events import TASK_HOOK_FAILED
from herder.model import Task
from herder.objects import (
    Alloc,
    DriverCapabilities,
    ExecResult,
    ExecSession,
    ExitResult,
    Fingerprint,
    NetworkDNS,
    NetworkIsolation,
    TaskEvent,
    TaskHandle,
)
from herder.plugins.loader import PluginSet

log = logging.getLogger(__name__)

Participants = Literal["builtin", "lifecycle", "driver", "all"]
"""Who takes part in one call of a hook: herder's built-in lifecycle plugins, third-party
lifecycle plugins, the task's driver, or all three at once."""

PRESTART_ORDER: tuple[Participants, ...] = ("builtin", "lifecycle", "driver")
"""The steps of prestart, by who takes part in each."""
CLEANUP_ORDER: tuple[Participants, ...] = ("driver", "lifecycle", "builtin")
"""The steps of cleanup, by who takes part in each."""


class Hooks:
    """Typed calls of every hook of :mod:`herder.hookspecs`."""

    def __init__(self, plugins: PluginSet) -> None:
        self.plugins = plugins
        self._callers: dict[tuple[str, Participants, str], Any] = {}

    @property
    def drivers(self) -> list[str]:
        return self.plugins.driver_names

    def add_builtins(self, builtins: Iterable[tuple[str, object]]) -> None:
        """Register herder's own lifecycle plugins, given in the order they run.

        pluggy calls the plugin registered last first, hence the reversal.
        """
        for name, plugin in reversed(list(builtins)):
            self.plugins.add_builtin(name, plugin)
        self._callers.clear()

    def remove_builtins(self, names: Iterable[str]) -> None:
        for name in names:
            self.plugins.remove(name)
        self._callers.clear()

    # -- choosing the participants ----------------------------------------

    def _caller(self, hook: str, who: Participants, driver: str = "") -> Any:
        """A hook caller restricted to ``who`` (cached).

        Every task calls a score of hooks, so the caller is chosen once: when
        no plugin taking part implements the hook, :func:`_no_implementation`
        (pluggy would still check the arguments and run its call loop for
        nothing); when the subset holds every implementation, the hook's own
        caller (a subset caller filters the implementations again at each call).
        """
        key = (hook, who, driver)
        caller = self._callers.get(key)
        if caller is None:
            keep: dict[str, object] = {}
            if who in ("builtin", "all"):
                keep |= self.plugins.plugins("builtin")
            if who in ("lifecycle", "all"):
                keep |= self.plugins.plugins("lifecycle")
            if who in ("driver", "all") and driver:
                driver_plugin = self.plugins.plugins("driver").get(driver)
                if driver_plugin is not None:
                    keep[driver] = driver_plugin
            kept = {id(p) for p in keep.values()}
            remove = [p for _, p in self.plugins.pm.list_name_plugin() if id(p) not in kept]
            whole = getattr(self.plugins.pm.hook, hook)
            caller = self.plugins.pm.subset_hook_caller(hook, remove)
            implementations = caller.get_hookimpls()
            if not implementations:
                caller = _no_implementation
            elif len(implementations) == len(whole.get_hookimpls()):
                caller = whole
            self._callers[key] = caller
        return caller

    def _implemented(self, hook: str, who: Participants, driver: str = "") -> bool:
        return self._caller(hook, who, driver) is not _no_implementation

    def _observe(self, hook: str, task: Task, ctx: TaskContext, **kwargs: Any) -> None:
        """Call an observer hook; a failure becomes a ``Task hook failed`` event."""
        try:
            self._caller(hook, "all", task.driver)(task=task, ctx=ctx, **kwargs)
        except Exception as exc:
            ctx.emit_event(TASK_HOOK_FAILED, self.describe_failure(hook, exc), hook=hook,
                           plugin=self.plugins.blame(exc), error=str(exc))

    def describe_failure(self, hook: str, exc: BaseException) -> str:
        """A one-line account of a hook failure, naming the plugin."""
        plugin = self.plugins.blame(exc)
        where = f"plugin {plugin!r}" if plugin else "a plugin"
        return f"{where} failed in {hook}: {type(exc).__name__}: {exc}"

    # -- driver description -------------------------------------------------

    def fingerprint(self, driver: str) -> Fingerprint:
        """The driver's fingerprint; a raising fingerprint is an unhealthy one."""
        try:
            result = self._caller("herder_driver_fingerprint", "driver", driver)()
        except Exception as exc:
            return Fingerprint(detected=False, healthy=False, description=self.describe_failure(
                "herder_driver_fingerprint", exc))
        if result is None:
            return Fingerprint(detected=True, healthy=True, description="no fingerprint")
        return result  # type: ignore[no-any-return]

    def task_schema(self, driver: str) -> dict[str, Any] | None:
        """The driver's config schema. A driver whose schema hook raises is broken:
        it is marked failed (``herder plugins`` shows why) and left out."""
        try:
            result = self._caller("herder_driver_task_schema", "driver", driver)()
        except Exception as exc:
            self.plugins.fail(driver, self.describe_failure("herder_driver_task_schema", exc))
            self._callers.clear()
            raise DriverError(f"driver {driver} is broken: {exc}") from exc
        return result  # type: ignore[no-any-return]

    def capabilities(self, driver: str) -> DriverCapabilities:
        """What the driver can do; the defaults when it does not say (or its hook raises:
        then it can do no more than the least, and a job needing more is refused)."""
        try:
            result = self._caller("herder_driver_capabilities", "driver", driver)()
        except Exception:
            return DriverCapabilities()
        return result if isinstance(result, DriverCapabilities) else DriverCapabilities()

    def task_schemas(self) -> dict[str, dict[str, Any] | None]:
        """The config schema of every driver that can give one; the others are marked failed."""
        schemas: dict[str, dict[str, Any] | None] = {}
        for driver in self.drivers:
            try:
                schemas[driver] = self.task_schema(driver)
            except DriverError:
                continue
        return schemas

    # -- allocation --------------------------------------------------------

    def alloc_network_create(self, alloc: Alloc, hostname: str,
                             dns: NetworkDNS | None = None) -> tuple[str, NetworkIsolation] | None:
        """The namespace a driver of the allocation made, with that driver's name; None when
        none of them makes one (herder then does). Raises whatever the driver raised."""
        for driver in _drivers_of(alloc.tasks):
            if not self._implemented("herder_alloc_network_create", "driver", driver):
                continue
            create = self._caller("herder_alloc_network_create", "driver", driver)
            made = create(alloc=alloc, hostname=hostname, dns=dns)
            if made is not None:
                return driver, made
        return None

    def alloc_network_destroy(self, driver: str, alloc: Alloc, isolation: NetworkIsolation) -> None:
        self._caller("herder_alloc_network_destroy", "driver", driver)(alloc=alloc, isolation=isolation)

    def alloc_prerun(self, alloc: Alloc) -> None:
        """Raises whatever a plugin raised: the allocation cannot run."""
        for driver in _drivers_of(alloc.tasks):
            self._caller("herder_alloc_prerun", "driver", driver)(alloc=alloc)
        self._caller("herder_alloc_prerun", "builtin")(alloc=alloc)
        self._caller("herder_alloc_prerun", "lifecycle")(alloc=alloc)

    def alloc_postrun(self, alloc: Alloc) -> None:
        for driver in _drivers_of(alloc.tasks):
            self._caller("herder_alloc_postrun", "driver", driver)(alloc=alloc)
        self._caller("herder_alloc_postrun", "lifecycle")(alloc=alloc)
        self._caller("herder_alloc_postrun", "builtin")(alloc=alloc)

    # -- task start ----------------------------------------------------------

    def task_prestart(self, task: Task, ctx: TaskContext, who: Participants) -> None:
        """One step of prestart; :mod:`herder.client.lifecycle` calls the steps in :data:`PRESTART_ORDER`
        (built-in plugins, third-party lifecycle plugins, the driver).

        Raises what a plugin raised (``RecoverableError`` means retry).
        """
        self._caller("herder_task_prestart", who, task.driver)(task=task, ctx=ctx)

    def task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        handle = self._caller("herder_task_start", "driver", task.driver)(task=task, ctx=ctx)
        if handle is None:
            raise DriverError(f"driver {task.driver} returned no task handle")
        return handle  # type: ignore[no-any-return]

    def task_poststart(self, task: Task, ctx: TaskContext, handle: TaskHandle) -> None:
        self._observe("herder_task_poststart", task, ctx, handle=handle)

    # -- running task ------------------------------------------------------

    def task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                  timeout: float) -> ExecResult:
        """Run ``command`` in the task; DriverError when the driver cannot exec."""
        if not self._implemented("herder_task_exec", "driver", task.driver):
            raise DriverError(f"driver {task.driver} does not support exec")
        result = self._caller("herder_task_exec", "driver", task.driver)(
            task=task, ctx=ctx, handle=handle, command=command, timeout=timeout)
        if result is None:
            raise DriverError(f"driver {task.driver} does not support exec")
        return result  # type: ignore[no-any-return]

    def task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                          tty: bool) -> ExecSession:
        """Start ``command`` in the task interactively; DriverError when the driver cannot."""
        unsupported = f"driver {task.driver} does not support interactive exec"
        if not self._implemented("herder_task_exec_session", "driver", task.driver):
            raise DriverError(unsupported)
        session = self._caller("herder_task_exec_session", "driver", task.driver)(
            task=task, ctx=ctx, handle=handle, command=command, tty=tty)
        if session is None:
            raise DriverError(unsupported)
        return session  # type: ignore[no-any-return]

    def task_event(self, task: Task, ctx: TaskContext, event: TaskEvent) -> None:
        """Tell observers of ``event``; a failing observer is logged (an event about
        an event could loop)."""
        try:
            self._caller("herder_task_event", "all", task.driver)(task=task, ctx=ctx, event=event)
        except Exception as exc:
            log.warning("%s", self.describe_failure("herder_task_event", exc))

    # -- exit and stop -----------------------------------------------------

    def task_exited(self, task: Task, ctx: TaskContext, result: ExitResult) -> None:
        self._observe("herder_task_exited", task, ctx, result=result)

    def task_prekill(self, task: Task, ctx: TaskContext) -> None:
        self._observe("herder_task_prekill", task, ctx)

    def task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        handle = self._caller("herder_task_recover", "driver", task.driver)(task=task, ctx=ctx, state=state)
        return handle  # type: ignore[no-any-return]

    def task_cleanup(self, task: Task, ctx: TaskContext, who: Participants) -> None:
        """One step of cleanup; :mod:`herder.client.lifecycle` calls the steps in :data:`CLEANUP_ORDER`
        and retries a step that raised ``RecoverableError``."""
        self._caller("herder_task_cleanup", who, task.driver)(task=task, ctx=ctx)


def _no_implementation(**kwargs: Any) -> None:
    """The call of a hook that no plugin taking part implements: what pluggy returns
    for a *firstresult* hook, and nothing anyone reads for the others."""
    return None


def _drivers_of(tasks: Iterable[Task]) -> list[str]:
    return sorted({t.driver for t in tasks})
