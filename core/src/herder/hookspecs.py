"""The hooks of the herder plugin contract.

This module *is* the plugin author's reference. A plugin is any object (a
module, an instance) carrying functions marked with :data:`herder.hookimpl`
whose names and argument names are those below; an implementation may accept
fewer arguments than the spec offers, never others.

There are two kinds of plugins, found through entry points:

``herder.drivers``
    A **driver**, named by its entry point (``docker``, ``exec``, ...), the
    name job files use in ``driver = "..."``. For a given task only that task's
    driver takes part in a task hook: a driver never sees another driver's
    tasks.

``herder.plugins``
    A **lifecycle plugin**. It takes part in every call of every hook it
    implements, for every task, whatever the driver. It may not implement the
    driver-scoped hooks (``herder_driver_fingerprint``,
    ``herder_driver_task_schema``, ``herder_driver_capabilities``,
    ``herder_task_start``, ``herder_task_exec``, ``herder_task_exec_session``,
    ``herder_task_recover``, ``herder_alloc_network_create``,
    ``herder_alloc_network_destroy``): a plugin that does is
    reported as failed and left out, so no lifecycle plugin can pre-empt a
    driver.

The entry point names a module or object carrying hookimpls, or a callable (a
class or factory) called with one argument, the plugin's configuration mapping
(table ``[plugin.NAME]`` of the configuration file, ``{}`` when absent).

Order and errors
----------------
Within one call, lifecycle plugins run in pluggy's order (later-registered
first; ``tryfirst`` and ``trylast`` honoured), and a plugin that needs to wrap
a call uses ``@hookimpl(wrapper=True)``. Where the driver's part must come at a
given point, herder makes separate calls, in this order:

* ``herder_task_prestart``: herder's built-in lifecycle plugins, then
  third-party lifecycle plugins, then the driver;
* ``herder_task_cleanup``: the driver, then third-party lifecycle plugins,
  then the built-in ones.

* ``herder_alloc_prerun``: the drivers of the allocation's tasks, then the
  built-in lifecycle plugins, then third-party ones;
* ``herder_alloc_postrun``: the drivers, then third-party lifecycle plugins,
  then the built-in ones.

An exception from a hook never crashes herder. :class:`herder.RecoverableError`
from ``herder_task_prestart``, ``herder_task_start`` or ``herder_task_cleanup``
means "try again"; any other exception from prestart or start fails the task at
once (``Driver Failure`` when the driver raised, ``Setup Failure`` when a
lifecycle plugin did). An exception from ``herder_alloc_prerun`` fails every
task of the allocation before it starts. An exception from any other hook is
recorded as a ``Task hook failed`` event naming the plugin, and the task goes
on.

Hooks marked *firstresult* stop at the first implementation that returns
something other than None, and return that value.
"""

from __future__ import annotations

from typing import Any

import pluggy

from herder.context import TaskContext
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

hookspec = pluggy.HookspecMarker("herder")


# --------------------------------------------------------------------------
# Driver description
# --------------------------------------------------------------------------


@hookspec(firstresult=True)
def herder_driver_fingerprint() -> Fingerprint | None:
    """Describe what the driver finds on this host.

    Called for one driver at a time: when herder starts (``herder run``,
    ``herder drivers``), and every 30 seconds after while it runs,
    so that a daemon that goes away or comes back is noticed. It must return within a few seconds, and never
    raise for a missing dependency: report ``detected=False`` (nothing found)
    or ``healthy=False`` (found but not working) with a ``description`` saying
    why.

    :returns: a :class:`herder.Fingerprint`; its ``attributes`` (``dict[str,
        str]``, keys like ``driver.docker.version``) can be used in job files
        as ``${attr.<key>}``.
    """


@hookspec(firstresult=True)
def herder_driver_task_schema() -> dict[str, Any] | None:
    """Give the JSON Schema that a task's ``config`` must satisfy.

    Called for one driver at a time, when a job that uses the driver is
    validated. Job files are validated against it after interpolation, and
    every error names the path inside ``config``.

    :returns: a JSON Schema (a dict, draft 2020-12), or None to accept any
        mapping.
    """


@hookspec(firstresult=True)
def herder_driver_capabilities() -> DriverCapabilities | None:
    """Say what the driver can do beyond starting a task.

    Called for one driver at a time, when a job that uses the driver is
    validated: a task that needs what its driver cannot do (to join its
    allocation's network namespace, to mount a host volume) is refused then,
    naming the driver, rather than started in the wrong place.

    :returns: a :class:`herder.DriverCapabilities`; None (or no
        implementation) means the defaults: host networking only, no volume
        mounts.
    """


# --------------------------------------------------------------------------
# Allocation lifecycle
# --------------------------------------------------------------------------


@hookspec(firstresult=True)
def herder_alloc_network_create(alloc: Alloc, hostname: str, dns: NetworkDNS | None) -> NetworkIsolation | None:
    """Make the network namespace of an allocation whose group asks for one
    (``network { mode = "bridge" }`` or ``"cni/NAME"``), when the driver must
    own it. Driver-scoped: called for the drivers of the allocation's tasks,
    before ``herder_alloc_prerun``.

    Most drivers do not implement it: herder then makes the namespace itself.
    A driver whose tasks can only join a namespace it made (docker: a
    container joins another container's, so the namespace is a pause
    container's) makes it here and returns it; herder then sets up its
    interfaces (the CNI plugins) and hands it to every task of the allocation
    as ``ctx.network``. It is called again for an allocation whose namespace
    the driver made before herder restarted: return the same one if it still
    exists.

    :param alloc: the allocation (``alloc.network`` is None yet).
    :param hostname: the hostname the job file gives the namespace, or "".
    :param dns: the group network's ``dns`` block, or None (the host's resolvers).
        A driver whose tasks take their ``resolv.conf`` from the namespace's owner
        (docker: every container of the allocation shares the pause container's)
        sets it there.
    :returns: a :class:`herder.NetworkIsolation`, or None to leave it to herder.
    :raises Exception: fails every task of the allocation (``Setup Failure``).
    """


@hookspec
def herder_alloc_network_destroy(alloc: Alloc, isolation: NetworkIsolation) -> None:
    """Remove a namespace this driver made in ``herder_alloc_network_create``.
    Driver-scoped: called for the driver that made it, after every task of the
    allocation is dead and the CNI plugins have released its interfaces, also
    by a herder that restarted and found the allocation over. Must be
    idempotent: the namespace may be gone already.

    :param alloc: the allocation.
    :param isolation: what ``herder_alloc_network_create`` returned.
    :raises RecoverableError: to have it tried again later.
    """



@hookspec
def herder_alloc_prerun(alloc: Alloc) -> None:
    """Called once per allocation, after its directory exists and before any of
    its tasks starts (not again when herder restarts and reattaches to it).

    :param alloc: the allocation; ``alloc.dir`` is the allocation's directory
        (``allocs/<alloc_id>`` under the data dir; its ``alloc`` subdirectory
        is the one the tasks share) and ``alloc.tasks`` the group's tasks.
    :raises Exception: any exception fails every task of the allocation
        (``Setup Failure``); none of them starts.
    """


@hookspec
def herder_alloc_postrun(alloc: Alloc) -> None:
    """Called once per allocation, after every one of its tasks is dead and
    cleaned up.

    :param alloc: the allocation.
    :raises Exception: recorded as a ``Task hook failed`` event of each task.
    """


# --------------------------------------------------------------------------
# Task start
# --------------------------------------------------------------------------


@hookspec
def herder_task_prestart(task: Task, ctx: TaskContext) -> None:
    """Prepare a task: called before each start (restarts included), after the
    task directory and the environment exist.

    herder's own built-in lifecycle plugins run first, then
    third-party lifecycle plugins, then the driver (an image pull, say).
    Implementations may add to ``ctx.env`` and write into ``ctx.task_dir``.

    :param task: the task, as the job file gives it.
    :param ctx: this run of the task.
    :raises RecoverableError: to have the start retried under the restart
        policy; any other exception fails the task (``Driver Failure`` from
        the driver, ``Setup Failure`` from a lifecycle plugin).
    """


@hookspec(firstresult=True)
def herder_task_start(task: Task, ctx: TaskContext) -> TaskHandle | None:
    """Start the task. Driver-scoped: implemented by drivers.

    Called after ``herder_task_prestart``, for every start (restarts included).

    The driver starts the task with ``ctx.env``, sends its output to the
    task's log files (a process through :class:`herder.sdk.SupervisedProcess`,
    which writes them itself; anything else by writing to ``ctx.stdout`` and
    ``ctx.stderr``), and records what cleanup must remove in ``ctx.created``.

    A handle that can tell when its task exits (its optional ``on_exit``, see
    :class:`herder.TaskHandle`; ``SupervisedProcess`` has it) spares herder a
    thread per running task; without it, a thread waits in its ``wait()``.

    :param task: the task; ``task.config`` has passed the driver's schema.
    :param ctx: this run of the task.
    :returns: a :class:`herder.TaskHandle` for the running task; its
        ``stats()`` reports a :class:`herder.TaskStats` (the sdk's
        ``process_stats`` and ``cgroup_stats`` measure one; a
        ``SupervisedProcess`` does it itself).
    :raises RecoverableError: to have the start retried under the restart
        policy; any other exception fails the task at once (``Driver
        Failure``).
    """


@hookspec
def herder_task_poststart(task: Task, ctx: TaskContext, handle: TaskHandle) -> None:
    """Called after every successful start, restarts included, and after herder
    restarted and reattached to the running task (services and checks are
    registered here).

    :param task: the task.
    :param ctx: this run of the task.
    :param handle: the handle the driver returned; ``handle.network`` is the
        driver's network, if any.
    """


# --------------------------------------------------------------------------
# Running task
# --------------------------------------------------------------------------


@hookspec(firstresult=True)
def herder_task_exec(
    task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str], timeout: float
) -> ExecResult | None:
    """Run a command inside the running task. Driver-scoped.

    Called while the task runs, each time herder runs a command inside it
    (the contract that script checks and exec requests are built on). A
    driver that cannot exec does not implement this hook; herder then
    answers "driver NAME does not support exec".

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    :param handle: the handle the driver returned at start.
    :param command: the program and its arguments.
    :param timeout: seconds after which the command is killed.
    :returns: an :class:`herder.ExecResult`: the exit code and stdout and
        stderr together, capped at 64 KiB.
    :raises TimeoutError: when the command outlived ``timeout`` (it is killed).
    """


@hookspec(firstresult=True)
def herder_task_exec_session(
    task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str], tty: bool
) -> ExecSession | None:
    """Start a command inside the running task, interactively. Driver-scoped.

    Called while the task runs, each time someone opens an interactive exec
    into it (``herder alloc exec -i -t``, the exec WebSocket): the command's
    stdin is fed as the user types, its output is read as it comes, and it
    runs until it exits or the session is closed (no timeout). A
    driver that cannot do it does not implement this hook; herder then
    answers "driver NAME does not support interactive exec".
    :class:`herder.sdk.ExecProcess` is such a session for a command the
    driver runs as a local process (the command itself, or the runtime's
    own ``exec`` program, e.g. ``runc exec --tty``).

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    :param handle: the handle the driver returned at start.
    :param command: the program and its arguments.
    :param tty: run the command on a terminal (its stdout and stderr are then
        one stream, and :meth:`herder.ExecSession.resize` sets its size).
    :returns: an :class:`herder.ExecSession`, once the command started.
    """


@hookspec
def herder_task_event(task: Task, ctx: TaskContext, event: TaskEvent) -> None:
    """Called for every task event, for observers. Must return quickly.

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    :param event: the event just recorded.
    """


# --------------------------------------------------------------------------
# Task exit and stop
# --------------------------------------------------------------------------


@hookspec
def herder_task_exited(task: Task, ctx: TaskContext, result: ExitResult) -> None:
    """Called each time the task exits, before the restart decision.

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    :param result: how the task ended.
    """


@hookspec
def herder_task_prekill(task: Task, ctx: TaskContext) -> None:
    """Called before herder kills a running task (services are deregistered
    here), before ``shutdown_delay``.

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    """


@hookspec(firstresult=True)
def herder_task_recover(task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
    """Reattach to a task after herder restarted. Driver-scoped.

    Called when herder (the agent, or a ``herder run`` on the same data dir)
    starts again and finds a task that an earlier herder process was running.
    ``herder_task_prestart`` is not called again; ``herder_task_poststart``
    follows a successful reattach. The plugin instance is a fresh one: all it
    knows of the task is ``state`` and ``ctx`` (whose ``created`` is restored).

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    :param state: the dict the task's handle returned from ``state()``.
    :returns: a handle for the still-running task, or None if it is gone (the
        restart policy then applies).
    """


@hookspec
def herder_task_cleanup(task: Task, ctx: TaskContext) -> None:
    """Release what the task created: called when the task is finished for
    good, and again later for a step that asked for it (:class:`herder.CleanupLater`).

    The driver runs first, then third-party lifecycle plugins, then the
    built-in ones. ``ctx.created`` lists what was recorded at start.

    A step that raises :class:`herder.CleanupLater` is not finished: the
    hook is called again for that task, for that step only (the driver, or the
    lifecycle plugins), once the exception's ``delay`` seconds have passed,
    with the same task and a new context with the same ``created``. That call
    may raise it again: so this hook may be called more than once for one
    task, and must take up where it left off. The wait is kept in the data dir's state database: if the
    process ends first, the next one on the data dir makes the call, at once
    if overdue.

    :param task: the task, as the job file gives it (interpolated for this run).
    :param ctx: this run of the task.
    :raises RecoverableError: to have cleanup retried (up to 4 times, with
        growing delays).
    :raises CleanupLater: to be called again after its ``delay`` (see above).
    """
