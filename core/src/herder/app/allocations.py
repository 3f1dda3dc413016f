"""Allocations: found by ID prefix, the tasks a signal, restart or exec is for, their usage and their files."""

from __future__ import annotations

import contextlib
import functools
import logging
import signal as _signal
from collections.abc import Iterator
from pathlib import Path

from herder.app.errors import Conflict, NotFound
from herder.client.alloc_runner import AllocRunner
from herder.client.allocfs import AllocFiles
from herder.client.client import Client
from herder.client.runtime import shared_runtime
from herder.client.stats import StatsSampler, UsageCollector
from herder.client.task_runner import KILL_LATENCY, TaskRunner
from herder.errors import HerderError, PlacementError
from herder.objects import ExecSession, TaskHandle, TaskStats, parse_signal

log = logging.getLogger("herder.agent")


def matching(prefix: str, allocs: list[AllocRunner]) -> list[AllocRunner]:
    """The allocations whose ID starts with ``prefix`` (every one for an empty prefix), as Nomad lists them."""
    return [a for a in allocs if a.alloc.id.startswith(prefix)]


def logs_dir(alloc: AllocRunner) -> Path:
    """Where the allocation's task logs are: a task's files are named after it, so
    a task name from the allocation (never a path from a request) picks them."""
    return Path(alloc.alloc.dir) / "alloc" / "logs"


def files(alloc: AllocRunner) -> AllocFiles:
    """The allocation's files as its tasks see them, read without following a link
    (:mod:`herder.client.allocfs`)."""
    return AllocFiles(Path(alloc.alloc.dir), [t.name for t in alloc.tasks])


def task(alloc: AllocRunner, name: str) -> TaskRunner:
    """:raises NotFound: the allocation has no task ``name``."""
    runner = next((t for t in alloc.tasks if t.name == name), None)
    if runner is None:
        raise NotFound(f"allocation {alloc.alloc.name} has no task {name!r}"
                       f" (tasks: {', '.join(t.name for t in alloc.tasks)})")
    return runner


def targets(alloc: AllocRunner, name: str | None) -> list[TaskRunner]:
    """Task ``name``, or every task of the allocation, of those running; :class:`Conflict` if none is."""
    runners = [task(alloc, name)] if name is not None else list(alloc.tasks)
    running = [r for r in runners if r.status.state == "running" and not r.done]
    if not running:
        raise Conflict(f"task {name} of {alloc.alloc.name} is not running" if name
                       else f"no task of {alloc.alloc.name} is running")
    return running


class Allocations:
    """The allocations of ``client``, and what is done to their tasks. Thread-safe."""

    def __init__(self, client: Client, collection_interval: float) -> None:
        self.client = client
        self.sampler = StatsSampler()
        self.usage = UsageCollector(self._running_handles, self.sampler, interval=collection_interval)

    def alloc(self, prefix: str) -> AllocRunner:
        """The allocation whose ID is ``prefix`` or starts with it, as Nomad accepts them.

        :raises NotFound: none does.
        :raises Conflict: several do.
        """
        matches = matching(prefix, self.client.allocs) if prefix else []
        exact = [a for a in matches if a.alloc.id == prefix]
        if exact:
            return exact[0]
        if not matches:
            raise NotFound(f"no allocation with ID prefix {prefix!r}")
        if len(matches) > 1:
            raise Conflict(f"allocation ID prefix {prefix!r} matches {len(matches)} allocations: "
                           + ", ".join(sorted(a.alloc.id for a in matches)))
        return matches[0]

    def signal(self, alloc: AllocRunner, task: str | None, name: str) -> list[str]:
        """Send signal ``name`` to ``task`` (or every running task); the names of the tasks signalled."""
        try:
            number = parse_signal(name)
            _signal.Signals(number)
        except ValueError:
            raise Conflict(f"unknown signal {name!r}") from None
        running = targets(alloc, task)
        for runner in running:
            runner.signal(number)
        return [r.name for r in running]

    def restart(self, alloc: AllocRunner, task: str | None, reason: str) -> list[str]:
        """Start restarting ``task`` (or every running task); the names of the tasks restarting."""
        running = targets(alloc, task)
        pool = shared_runtime().pool
        for runner in running:  # a restart kills first: each begins as a kill does, not after the others
            pool.submit(functools.partial(runner.restart, reason or "Restart requested through the API"),
                        within=KILL_LATENCY)
        return [r.name for r in running]

    def stop(self, alloc: AllocRunner, *, replace: bool = True) -> list[AllocRunner]:
        """Stop ``alloc`` gracefully (returns at once) and, if it was live and ``replace`` says so, place
        the allocation that replaces it, as Nomad's ``alloc stop`` ("stop and reschedule"): its job, group
        and index again, started once ``alloc`` is dead. The replacement, placed now (none for an
        allocation already finished or stopping); one that needs a port ``alloc`` holds is placed once
        it is dead."""
        live = alloc.status in ("pending", "running") and not alloc.stopping
        alloc.stop()
        if not (live and replace):
            return []
        try:
            replacement = self.client.place_replacement(alloc, ())
        except PlacementError:
            shared_runtime().pool.submit(functools.partial(self._place_after, alloc))
            return []
        shared_runtime().pool.submit(functools.partial(self._run_after, alloc, replacement))
        return [replacement]

    def _run_after(self, stopped: AllocRunner, replacement: AllocRunner) -> None:
        self.client.wait([stopped])
        self.client.run([replacement])

    def _place_after(self, stopped: AllocRunner) -> None:
        self.client.wait([stopped])
        try:
            self.client.run([self.client.place_replacement(stopped, ())])
        except PlacementError as exc:
            log.warning("allocation %s stopped, not replaced: %s", stopped.alloc.name, exc)

    def stats(self, alloc: AllocRunner) -> dict[str, TaskStats | None]:
        """The resource usage of every task of ``alloc``: None for a task not running, or whose driver cannot
        tell. It is the latest the collector read (:mod:`herder.client.stats`), or for a task it has not
        read yet (started since), read now."""
        handles = {runner.name: handle for runner in alloc.tasks
                   if runner.status.state == "running" and (handle := runner.handle) is not None}
        usage = {name: self.usage.latest(handle) for name, handle in handles.items()}
        unread = {name: handle for name, handle in handles.items() if usage[name] is None}
        if unread:
            usage.update(self.sampler.sample(unread))
        return {runner.name: usage.get(runner.name) for runner in alloc.tasks}

    def _running_handles(self) -> Iterator[tuple[str, TaskHandle]]:
        """The handle of every running task, with its driver's name: what the usage collector reads."""
        for alloc in self.client.allocs:
            for runner in alloc.tasks:
                if runner.status.state == "running" and (handle := runner.handle) is not None:
                    yield runner.task.driver, handle

    def exec(self, alloc: AllocRunner, task: str, command: list[str], timeout: float) -> tuple[int, bytes]:
        """Run ``command`` in running task ``task``: its exit code and output."""
        runner = targets(alloc, task)[0]
        with _exec_refused(task):
            result = runner.exec(command, timeout)
        return result.exit_code, result.output

    def exec_session(self, alloc: AllocRunner, task: str, command: list[str], tty: bool) -> ExecSession:
        """Start ``command`` interactively in running task ``task`` (on a terminal when ``tty``);
        the caller closes the session."""
        runner = targets(alloc, task)[0]
        with _exec_refused(task):
            return runner.exec_session(command, tty)


@contextlib.contextmanager
def _exec_refused(task: str) -> Iterator[None]:
    """Why an exec into ``task`` could not run, as a :class:`Conflict`."""
    try:
        yield
    except RuntimeError as exc:  # the task stopped meanwhile
        raise Conflict(str(exc)) from None
    except HerderError as exc:
        raise Conflict(f"exec in {task}: {exc}") from None
    except OSError as exc:  # the program is not there, or not executable
        raise Conflict(f"exec in {task}: cannot run {exc.filename or 'the command'}: {exc.strerror or exc}") from None
