"""One driver, loaded as herder loads it, running tasks through herder's hook facade one step at a time.

:class:`DriverHarness` is what the conformance kit (:class:`herder.testing.DriverContract`)
stands on, and what a driver's own tests can use for anything the kit does
not cover. It loads every installed plugin through the entry points
(:func:`herder.plugins.loader.load_plugins`, with the driver's
``[plugin.NAME]`` table) and calls them through the hook facade
(:class:`herder.plugins.hooks.Hooks`) through the script herder's task runner
drives (:class:`herder.client.script.TaskScript`); but instead of the runner's
pool, each method of :class:`TaskRun` advances the script to its next stop, so
that a test can look at the task between two of them.

Each task is the only task of an allocation of its own, placed by herder's
placement (directories in the harness's data dir, ports from
:data:`PORT_RANGE`) with the data dir's process supervisor in its context, and,
when asked, a network namespace of its own (:mod:`herder.testing.netns`).
:meth:`DriverHarness.close` stops and cleans up whatever is left, and makes
sure no process of any task outlives it.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from herder.client.alloc_hooks import AllocHooks
from herder.client.lifecycle import TaskLifecycle
from herder.client.node import Node, host_attributes
from herder.client.placement import PlacedAlloc, Placement
from herder.client.ports import PortAllocator
from herder.client.script import AwaitExit, Failed, Prestarted, Ran, Stepper, TaskScript, Woke, run_through
from herder.context import TaskContext
from herder.errors import CleanupLater, JobError
from herder.jobspec import load_job_text
from herder.model import Task
from herder.objects import AllocNetwork, ExecResult, ExecSession, ExitResult, Fingerprint, TaskEvent, TaskHandle
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from herder.sdk import get_var
from herder.supervisor import Supervisor
from herder.supervisor.logfiles import log_files
from herder.supervisor.protocol import Squatted, open_state_dir, socket_address
from herder.testing import netns, processes

PORT_RANGE = (2000, 12000)
"""Where the harness's dynamic ports come from."""

TASK_NAME = "task"
TASK_PATH = "job.groups[0].tasks[0]"
"""Where the task is in its job document: configuration errors are named from here."""

KILL_GRACE = 10.0
"""How long past a task's ``kill_timeout`` a kill may take before the harness gives up on it."""

CALL_LIMIT = 60.0
"""How long the harness waits for any other hook when it closes."""

REAP_TIMEOUT = 10.0
"""How long :meth:`DriverHarness.close` waits for a process it SIGKILLed to be gone."""

T = TypeVar("T")


class DriverNotLoaded(Exception):
    """No installed entry point offers the driver, or it failed to load."""


class DidNotReturn(AssertionError):
    """A hook or handle method did not return in the time it had (see :func:`bounded`)."""


def load_hooks(driver: str, plugin_config: Mapping[str, Any] | None = None) -> Hooks:
    """Every installed plugin, loaded as herder loads them, with ``plugin_config`` as ``driver``'s table.

    :raises DriverNotLoaded: when ``driver`` is not among the loaded drivers, with the loader's reason.
    """
    plugins = load_plugins({driver: dict(plugin_config or {})})
    if driver not in plugins.driver_names:
        reasons = [record.error or "disabled" for record in plugins.records
                   if record.name == driver and record.kind == "driver"]
        why = "; ".join(reasons) or "no herder.drivers entry point of that name is installed"
        raise DriverNotLoaded(f"driver {driver!r} is not loaded: {why}")
    return Hooks(plugins)


def bounded(call: Callable[[], T], limit: float, what: str) -> T:
    """``call()``, but raise :class:`DidNotReturn` if it has not returned after ``limit`` seconds.

    The call goes on in a daemon thread: a driver that hangs cannot hang the test run.
    """
    outcome: list[T] = []
    failure: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=target, name=f"herder.testing: {what}", daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        raise DidNotReturn(f"{what} did not return within {limit:g}s")
    if failure:
        raise failure[0]
    return outcome[0]


def call_own_hook(hooks: Hooks, driver: str, hook: str, limit: float) -> object:
    """The driver's own implementation of ``hook`` (no argument), called directly rather than through
    the facade, which would turn an exception into a default: bounded by ``limit`` seconds.

    :raises DidNotReturn: it did not return in time.
    :raises Exception: whatever the hook raised.
    """
    plugins = hooks.plugins
    own = plugins.plugins("driver")[driver]
    others = [plugin for _, plugin in plugins.pm.list_name_plugin() if plugin is not own]
    return bounded(plugins.pm.subset_hook_caller(hook, others), limit, hook)


def job_document(driver: str, config: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    """A canonical job document of one batch job, one group, one task of ``driver`` with ``config``.

    ``fields`` are keys of the task in the canonical document (``kill_timeout="1s"``,
    ``kill_signal="SIGTERM"``, ``env={...}``, ``resources={"network": {"ports": [...]}}``, ...).
    """
    task = {"name": TASK_NAME, "driver": driver, "config": dict(config), **fields}
    return {"job": {"name": "herder-testing", "type": "batch", "groups": [{"name": "contract", "tasks": [task]}]}}


@dataclass
class _Session:
    """What one herder process holds: its plugin instances, its supervisor connection, its placement."""

    hooks: Hooks
    supervisor: Supervisor
    placement: Placement
    fingerprint: Fingerprint
    node: Node


class DriverHarness:
    """``driver``, loaded with ``plugin_config``, running tasks in ``data_dir``.

    Use it as a context manager, or call :meth:`close`. Not thread-safe: one test drives it.

    :raises DriverNotLoaded: when the driver is not installed or fails to load.
    """

    def __init__(self, driver: str, plugin_config: Mapping[str, Any] | None = None, *, data_dir: Path) -> None:
        self.driver = driver
        self.plugin_config = dict(plugin_config or {})
        self.data_dir = Path(data_dir).absolute()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.runs: list[TaskRun] = []
        self.networks: list[netns.KitNetwork] = []
        """The allocations' namespaces :meth:`task` made, removed by :meth:`close`."""
        self._ports = PortAllocator(*PORT_RANGE)
        self._session = self._open_session()
        self._closed = False
        self.closing = threading.Event()
        """Set when the harness closes: every wait of the lifecycle steps (``shutdown_delay``, cleanup
        retries) ends at once."""

    def __enter__(self) -> DriverHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def hooks(self) -> Hooks:
        """The hook facade of the current plugin instances (fresh ones after :meth:`restart`)."""
        return self._session.hooks

    @property
    def fingerprint(self) -> Fingerprint:
        """The driver's fingerprint, taken through the facade when the plugins were (last) loaded."""
        return self._session.fingerprint

    def _open_session(self) -> _Session:
        hooks = load_hooks(self.driver, self.plugin_config)
        fingerprint = hooks.fingerprint(self.driver)
        attributes = host_attributes()
        if fingerprint.detected and fingerprint.healthy:
            attributes.update(fingerprint.attributes)
        supervisor = Supervisor(self.data_dir, keep=False)
        return _Session(hooks=hooks, supervisor=supervisor,
                        placement=Placement(self.data_dir, self._ports, supervisor), fingerprint=fingerprint,
                        node=Node(name="herder-testing", datacenter="dc1", attributes=attributes))

    def task(self, config: Mapping[str, Any], *, group_network: bool = False, **fields: Any) -> TaskRun:
        """Place a task of the driver with ``config`` (see :func:`job_document` for ``fields``);
        ``herder_alloc_prerun`` has run, nothing else.

        ``group_network``: the allocation has a network namespace of its own, as a group with
        ``network { mode = "bridge" }`` (see :mod:`herder.testing.netns`), made before
        ``herder_alloc_prerun`` and given to the task as ``ctx.network``; :meth:`close` removes it
        once the task is cleaned up.

        :raises JobError: the job document is invalid (the task's ``config`` is checked at prestart).
        :raises netns.NetworkUnavailable: ``group_network``, and no namespace can be made here.
        """
        job = load_job_text(json.dumps(job_document(self.driver, config, **fields)), "json", "<herder.testing>")
        placed = self._session.placement.place(job, job.groups[0], 0, self._session.node)
        made = None
        if group_network:
            try:
                made = netns.create(self.hooks, placed.alloc)
            except BaseException:
                self._session.placement.release(placed)
                raise
            self.networks.append(made)
            placed.alloc.network = made.network
        run = TaskRun(self, placed, made.network if made else None)
        self.runs.append(run)
        run.alloc_hooks.prerun(self.hooks)
        return run

    def restart(self) -> None:
        """Stand for herder being stopped and started again on the same data dir.

        The tasks keep running. The supervisor connection is closed and a new
        one made, the plugins are loaded again (fresh instances), and each
        :class:`TaskRun` gets the context placement restores from its stored
        ports and ``created`` resources, and no handle: get one with
        :meth:`TaskRun.recover`.
        """
        old = self._session
        for run in self.runs:
            old.placement.release(run.placed)
        old.supervisor.close()
        self._session = self._open_session()
        for run in self.runs:
            alloc = run.placed.alloc
            placed = self._session.placement.restore(
                run.placed.job, run.placed.group, alloc.id, alloc.index, self._session.node, run.placed.ports,
                {TASK_NAME: run.ctx.created.items()})
            run._attach(placed, restored=True)

    def close(self) -> None:
        """Kill every task still running, clean up every task not cleaned up yet, run
        ``herder_alloc_postrun``, give back ports and log sinks; then kill whatever
        process of a task is still there and have the supervisor let go of it.

        Everything is done even when a step fails.

        :raises ExceptionGroup: the steps that failed.
        """
        if self._closed:
            return
        self._closed = True
        self.closing.set()
        errors: list[Exception] = []

        def attempt(call: Callable[[], object], limit: float, what: str) -> None:
            try:
                bounded(call, limit, what)
            except Exception as exc:
                exc.add_note(f"while closing the harness of driver {self.driver!r}: {what}")
                errors.append(exc)

        for run in reversed(self.runs):
            if run.handle is not None and run.result is None:
                attempt(run.kill, run.task.kill_timeout + KILL_GRACE, "kill")
            if not run.cleaned_up:
                attempt(run.cleanup, CALL_LIMIT, "herder_task_cleanup")
        for run in self.runs:
            attempt(functools.partial(run.alloc_hooks.postrun, self.hooks), CALL_LIMIT, "herder_alloc_postrun")
            attempt(functools.partial(self._session.placement.release, run.placed), CALL_LIMIT, "releasing placement")
        processes.kill(processes.marked(*(run.marker for run in self.runs)))
        attempt(self._reap, CALL_LIMIT, "reaping the supervisor's processes")
        for network in self.networks:  # once nothing of the tasks is in them
            attempt(network.remove, CALL_LIMIT, f"removing the network namespace {network.network.path}")
        self._session.supervisor.close()
        if errors:
            raise ExceptionGroup(f"closing the harness of driver {self.driver!r}", errors)

    def _reap(self) -> None:
        """Stop and forget every process the data dir's supervisor still holds, so that it leaves.

        A driver that lost track of a process (no kill, no wait) would keep the
        supervisor alive. Nothing is started when no supervisor listens.
        """
        try:
            dir_fd = open_state_dir(self.data_dir)
        except (OSError, Squatted):
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(socket_address(dir_fd))
            except OSError:
                return
            finally:
                os.close(dir_fd)
        supervisor = self._session.supervisor
        for proc in supervisor.list():
            if supervisor.attach(proc.id) is None:
                continue
            if proc.running:
                supervisor.stop(proc.id, signal.SIGKILL, 0)
            supervisor.wait(proc.id, REAP_TIMEOUT)
            supervisor.forget(proc.id)


class TaskRun:
    """One task, its script advanced one stop at a time, as herder's task runner advances it.

    Steps: :meth:`prestart` (optional: :meth:`start` does it first if need
    be), :meth:`start`, then :meth:`wait`, :meth:`exec`, :meth:`signal`, :meth:`kill`;
    :meth:`recover` after :meth:`DriverHarness.restart`; :meth:`cleanup` at
    the end (:meth:`DriverHarness.close` does what the test did not).

    Between :meth:`prestart` and :meth:`start` a test may add to ``ctx.env``,
    as a lifecycle plugin's prestart would: the task starts with it, and
    ``${NAME}`` references to it in the task's config are resolved.

    Every task's environment also holds :data:`herder.testing.processes.MARKER`
    with a value of its own, by which the harness finds the task's processes.
    """

    def __init__(self, harness: DriverHarness, placed: PlacedAlloc, network: AllocNetwork | None = None) -> None:
        self.harness = harness
        self.network = network
        """The allocation's namespace (:meth:`DriverHarness.task`'s ``group_network``), else None."""
        self.marker = uuid.uuid4().hex
        self.events: list[TaskEvent] = []
        """Every event the task emitted (a driver's ``Driver`` progress events, say)."""
        self.cleaned_up = False
        self._attach(placed)

    def _attach(self, placed: PlacedAlloc, *, restored: bool = False) -> None:
        """Take the context of a (new or ``restored``) placement; any handle belonged to the one before."""
        self.placed = placed
        self.alloc_hooks = AllocHooks(placed.alloc, prerun_done=restored)
        placed_task = placed.tasks[0]
        self.ctx: TaskContext = placed_task.ctx
        self.ctx.emitter = self._record
        if self.network is not None:  # as herder gives it again to a restored allocation
            placed.alloc.network = self.network
            self.ctx.network = self.network
        self.ctx.env[processes.MARKER] = self.marker
        lifecycle = TaskLifecycle(self.harness.hooks, placed_task.task, self.ctx,
                                  make_lookup=placed_task.make_lookup, interrupt=self.harness.closing)
        self._script = TaskScript(lifecycle, self.harness.closing, TASK_PATH)
        self._steps: Stepper | None = None
        self.handle: TaskHandle | None = None
        self.result: ExitResult | None = None
        """How the task ended, once :meth:`wait` has seen it."""

    @property
    def task(self) -> Task:
        """The task as the hooks see it: interpolated for this run once prepared."""
        return self._script.lifecycle.task

    def _record(self, event: TaskEvent) -> None:
        self.events.append(event)
        self.harness.hooks.task_event(self.task, self.ctx, event)

    # -- the steps -----------------------------------------------------------------

    def _advance(self, recover: dict[str, Any] | None = None) -> Stepper:
        """The script advanced to its next stop: begun (from ``recover``, if given) when there is none,
        the next run when the last one is over."""
        steps = self._steps
        if steps is None or recover is not None or steps.over:
            steps = self._steps = Stepper(self._script.life(recover))
            steps.send(None)
        elif isinstance(steps.at, Ran):
            steps.send(0.0)  # run the task again, at once
        else:
            steps.send(None)
        self.handle = steps.handle
        if isinstance(steps.at, Ran) and isinstance(steps.outcome, Failed):
            failed = steps.outcome
            raise failed.error if failed.error is not None else JobError(failed.errors)
        return steps

    def prestart(self) -> None:
        """Prepare the environment, check the config against the driver's schema, run every prestart step.

        :raises JobError: the config does not match the driver's schema (each error names its path).
        """
        # After a run that ended (its exit seen by :meth:`wait`), the script first notes the end, then
        # begins the next run: advance until the new run's prestart is done.
        while not isinstance(self._steps.at if self._steps else None, Prestarted):
            self._advance()

    def start(self) -> TaskHandle:
        """Start the task (after :meth:`prestart`, which runs first if it has not) and run poststart."""
        self.prestart()
        steps = self._advance()
        self.result = None
        assert steps.handle is not None, "a run that started has a handle"
        return steps.handle

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        """The handle's ``wait(timeout)``; the result is kept in :attr:`result`, and told to the
        ``herder_task_exited`` hooks."""
        steps = self._steps
        if steps is None or not isinstance(steps.at, AwaitExit):  # over: the handle is asked again
            return self._running().wait(timeout)
        exit = steps.await_exit(timeout)
        if exit is None:
            return None
        self.result = exit.result
        return exit.result

    def exec(self, command: Sequence[str], timeout: float) -> ExecResult:
        """Run ``command`` in the task through the facade (a driver without exec gives DriverError)."""
        return self._script.exec(self._running(), list(command), timeout)

    def exec_session(self, command: Sequence[str], tty: bool) -> ExecSession:
        """Start ``command`` in the task interactively through the facade (a driver without it gives
        DriverError); the caller closes the session."""
        return self._script.exec_session(self._running(), list(command), tty)

    def signal(self, sig: int) -> None:
        """``Signaling``, then the handle's ``signal``."""
        self._script.signal(self._running(), sig)

    def kill(self) -> None:
        """Prekill, the task's ``shutdown_delay``, then the handle's ``kill`` with the task's
        ``kill_timeout`` and ``kill_signal``.

        :raises Exception: what the handle's kill raised when it failed for good.
        """
        handle, steps = self._running(), self._steps
        if steps is not None and isinstance(steps.at, AwaitExit) and steps.at.killable:
            steps.send(Woke.KILL)
            failure = steps.kill_failure
        else:  # killed already, or exited: the kill path again, as herder would
            failure = run_through(self._script.kill(handle))
        if failure is not None:
            raise failure

    def recover(self, state: dict[str, Any]) -> TaskHandle | None:
        """``herder_task_recover`` with ``state`` (what a handle's ``state()`` gave), as after
        :meth:`DriverHarness.restart`: the environment is prepared again, prestart is not run."""
        steps = self._advance(recover=state)
        self.result = None
        return steps.handle if isinstance(steps.at, AwaitExit) else None

    def cleanup(self) -> list[CleanupLater]:
        """Every cleanup step, in herder's order, each even if one before failed; a step that
        raises RecoverableError is tried again, as herder does.

        :returns: what steps asked to be done later (:class:`herder.CleanupLater`); the harness
            does not wait for that.
        :raises Exception: what a step raised (an ``ExceptionGroup`` when several did).
        """
        self.cleaned_up = True
        steps = self._steps
        if steps is not None and isinstance(steps.at, Ran):
            steps.send(None)  # no run again: the script ends with its cleanup
            report = steps.report
        else:  # the task still runs (its kill failed), or cleaned up already: the cleanup again
            report = None
        if report is None:
            report = self._script.cleanup()
        errors = [exc for _, exc in report.failed]
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup("cleanup steps failed", errors)
        return [later for _, later in report.later]

    # -- looking at the task ---------------------------------------------------------

    def task_path(self, name: str) -> str:
        """The path of file ``name`` in the task's local dir as the task sees it (``$NOMAD_TASK_DIR/name``);
        the host's side of it is :meth:`local_file`. Meaningful after prestart, which may change it."""
        return f"{get_var(self.ctx.env, 'TASK_DIR')}/{name}"

    def local_file(self, name: str) -> Path:
        """File ``name`` in the task's local dir, on the host."""
        return self.ctx.task_dir.local_dir / name

    def log_file(self, stream: str = "stdout", index: int = 0) -> Path:
        """``<logs_dir>/<task>.<stream>.<index>``."""
        return self.ctx.task_dir.logs_dir / f"{self.ctx.task_name}.{stream}.{index}"

    def output(self, stream: str = "stdout") -> bytes:
        """Everything in the task's log files of ``stream`` so far, oldest file first."""
        return b"".join(path.read_bytes() for path in log_files(self.ctx.task_dir.logs_dir, self.ctx.task_name,
                                                                 stream))

    def _running(self) -> TaskHandle:
        if self.handle is None:
            raise RuntimeError("the task has no handle: start or recover it first")
        return self.handle


def diagnosis(run: TaskRun) -> str:
    """How the task is doing, and the end of its output, to append to a failure message."""
    try:
        result = bounded(lambda: run.wait(0), KILL_GRACE, "wait(0)")
        status = f"it exited: {result}" if result is not None else "it still runs"
    except Exception as exc:
        status = f"wait(0) failed: {type(exc).__name__}: {exc}"
    tails = [f"{stream}: {run.output(stream)[-2000:].decode(errors='replace')!r}" for stream in ("stdout", "stderr")]
    return "\n  " + "\n  ".join([status, *tails])
