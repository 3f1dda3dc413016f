"""Task processes started through the data dir's process supervisor.

:class:`SupervisedProcess` is a complete :class:`herder.TaskHandle` for a
local process: raw_exec returns it as is, and other drivers that run a
program (java without isolation, qemu, ``rkt run``) can too. The process
belongs to the supervisor, not to the herder process: it outlives herder,
its output goes into the task's rotating log files, and :meth:`state` is
what :meth:`SupervisedProcess.recover` needs to find it again.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import secrets
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from herder import events
from herder.context import TaskContext
from herder.errors import DriverError, RecoverableError
from herder.model import Task
from herder.objects import DriverNetwork, ExitResult, TaskStats, parse_signal
from herder.sdk.paths import allow_traversal
from herder.sdk.stats import process_stats
from herder.supervisor import ProcInfo, Supervisor, SupervisorError, SupervisorUnavailable
from herder.supervisor.proctree import Cgroup, ProcessTree, SessionTree
from herder.supervisor.protocol import process_alive, process_start_time
from herder.supervisor.pump import Dropped

ABANDON_WAIT = 5.0
"""How long a start that went unanswered waits for its process, if it started, to be killed."""

ORPHAN_KILL_WAIT = 2.0
"""How long :meth:`SupervisedProcess.recover` waits for an orphan it killed to be gone."""


class SupervisedProcess:
    """A task's process, run by the supervisor, leading its own process group.

    Signals go to every process the task started (its cgroup, else its
    sessions and descendants), so a child that left the group gets them too;
    when the leader exits the supervisor kills what is left of them. After
    :meth:`wait` has seen the exit, the supervisor's record of it is dropped.
    """

    def __init__(self, supervisor: Supervisor, info: ProcInfo, *, default_signal: int = signal.SIGINT,
                 network: DriverNetwork | None = None) -> None:
        self.id = info.id
        self.network = network
        self._supervisor = supervisor
        self._info = info
        self._default_signal = default_signal
        self._result: ExitResult | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<SupervisedProcess {self.id} pid={self.pid}>"

    @property
    def pid(self) -> int:
        return self._info.pid

    @classmethod
    def spawn(cls, task: Task, ctx: TaskContext, argv: Sequence[str], *, env: Mapping[str, str], cwd: Path,
              user: str | None = None, groups: Sequence[int] = (), host_paths: bool = False,
              default_signal: int = signal.SIGINT, network: DriverNetwork | None = None,
              netns: Path | None = None) -> SupervisedProcess:
        """Start ``argv`` for ``task`` through ``ctx.supervisor``, as ``user`` when given: with its
        groups, and the group ids ``groups`` besides (the group of a device it needs, say).

        Its output goes to the task's log files (``task.logs`` says how they
        rotate). If herder goes away without stopping it, the supervisor stops
        it with the task's ``kill_signal`` (else ``default_signal``) and
        ``kill_timeout`` when the session asked for that.

        ``host_paths``: the process opens the task's files by their paths on
        the host (``$NOMAD_TASK_DIR/...``, a JVM's ``-jar``), as raw_exec's
        and a plain JVM's do. Run so as another ``user`` than herder's, it
        must pass through herder's data dir, which is made 0711 first. A
        program given only paths relative to its working directory (QEMU)
        leaves the data dir 0700.

        ``netns``: the network namespace the process runs in (``ctx.network.path`` for a task
        of a bridge-mode group); None, the host's.

        :raises DriverError: when it cannot start (no such command, bad ``cwd``, unknown user, ...).
        :raises RecoverableError: when the supervisor cannot be reached.
        """
        supervisor = _supervisor_of(ctx)
        if (host_paths and user and _another_user(user)
                and ctx.task_dir.dir.absolute().is_relative_to(supervisor.data_dir)):
            allow_traversal(supervisor.data_dir, ctx.task_dir.dir.absolute().parent)
        id = f"{ctx.alloc_id}.{ctx.task_name}.{secrets.token_hex(4)}"
        stop_signal = parse_signal(task.kill_signal) if task.kill_signal else default_signal
        try:
            info = supervisor.spawn(
                id, argv, env=env, cwd=cwd, user=user, groups=groups, logs_dir=ctx.task_dir.logs_dir,
                task=ctx.task_name, max_files=task.logs.max_files, max_file_size=task.logs.max_file_size,
                stop_signal=stop_signal, kill_timeout=task.kill_timeout, output_paths=ctx.output_paths,
                on_unsafe_log=_reporter(ctx), on_logs_dropped=functools.partial(_report_dropped, ctx), netns=netns,
            )
        except SupervisorUnavailable as err:
            _abandon(supervisor, id)
            raise RecoverableError(str(err)) from err
        except SupervisorError as err:
            raise DriverError(str(err)) from err
        return cls(supervisor, info, default_signal=default_signal, network=network)

    @classmethod
    def recover(cls, ctx: TaskContext, state: Mapping[str, Any],
                default_signal: int = signal.SIGINT) -> SupervisedProcess | None:
        """Find the process of a handle's :meth:`state` again, through ``ctx.supervisor``.

        None when the supervisor does not know it (it is not the one that
        started it): then the process, if it still runs, is killed, so that
        the task never runs twice.
        """
        saved = state.get("supervisor")
        if not isinstance(saved, Mapping):
            return None
        supervisor = _supervisor_of(ctx)
        info = supervisor.attach(saved["id"], on_unsafe_log=_reporter(ctx),
                                 on_logs_dropped=functools.partial(_report_dropped, ctx))
        if info is None:
            _kill_orphan(saved["pid"], saved["start_time"], saved.get("cgroup"))
            return None
        return cls(supervisor, info, default_signal=default_signal)

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        """How the process exited, once all its output is in the log files; None after ``timeout`` s.

        If the supervisor is lost meanwhile, the process is taken over again
        through a new connection; failing that, it is killed and the result
        says so in ``error``.
        """
        if self._result is not None:
            return self._result
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                info = self._supervisor.wait(self.id, remaining)
            except SupervisorUnavailable as err:
                if self._reattach():
                    continue
                _kill_orphan(self.pid, self._info.start_time, self._info.cgroup)
                return self._finish(ExitResult(exit_code=-1, error=f"lost the process supervisor: {err}"),
                                    forget=False)
            except SupervisorError:
                if self._result is not None:  # another thread saw the exit first, and forgot it
                    return self._result
                raise
            if info is None:
                return None
            return self._finish(ExitResult(exit_code=info.exit_code, signal=info.signal))

    def on_exit(self, callback: Callable[[], None]) -> bool:
        """Call ``callback`` (no arguments) once :meth:`wait` may return without blocking: the process
        exited, or the supervisor was lost; at once if so already. It is called from the
        supervisor connection's thread, so it must be quick and must not call this handle: it
        hands the work on, which then calls ``wait(0)``. See :class:`herder.TaskHandle`.

        :returns: True (a supervised process can always tell).
        """
        if self._result is not None:
            callback()
        else:
            self._supervisor.on_exit(self.id, callback)
        return True

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every process of the task (nothing once the process has exited)."""
        try:
            self._supervisor.signal(self.id, sig)
        except SupervisorError:
            if self._result is None:  # not just forgotten after it exited meanwhile
                raise

    def kill(self, timeout: float, sig: int | None = None) -> None:
        """Send ``sig`` (None: the default signal) to the task, wait up to ``timeout`` s, then SIGKILL it.

        The supervisor kills every process of the task after ``timeout`` by itself, so the
        task is stopped even if this herder process dies meanwhile.
        """
        self._stop(self._default_signal if sig is None else sig, timeout)
        if self.wait(timeout) is None:
            self._stop(signal.SIGKILL, 0)
            self.wait()

    def stats(self) -> TaskStats | None:
        """Memory and CPU of every process of the task (:func:`herder.sdk.stats.process_stats`)."""
        if self._result is not None or process_start_time(self.pid) != self._info.start_time:
            return None
        return process_stats(self._tree().pids())

    def _tree(self) -> ProcessTree:
        """The task's processes: its cgroup's, else the leader's descendants and sessions."""
        if self._info.cgroup is not None:
            return Cgroup(Path(self._info.cgroup))
        tree = SessionTree()
        tree.started(self.pid)
        return tree

    def state(self) -> dict[str, Any]:
        """``{"supervisor": {"id", "pid", "start_time", "cgroup"?}}``: drivers may add keys of their own beside it."""
        saved: dict[str, Any] = {"id": self.id, "pid": self.pid, "start_time": self._info.start_time}
        if self._info.cgroup is not None:
            saved["cgroup"] = self._info.cgroup
        return {"supervisor": saved}

    def _stop(self, sig: int, timeout: float) -> None:
        try:
            self._supervisor.stop(self.id, sig, timeout)
        except SupervisorUnavailable:
            pass  # wait() takes the process over again, or finds it lost
        except SupervisorError:
            if self._result is None:  # not just forgotten after it exited meanwhile
                raise

    def _reattach(self) -> bool:
        """Take the process over again after the connection broke; False if no supervisor knows it."""
        try:
            return self._supervisor.attach(self.id) is not None
        except SupervisorError:
            return False

    def _finish(self, result: ExitResult, *, forget: bool = True) -> ExitResult:
        """Keep the first result; the first to get here drops the supervisor's record."""
        with self._lock:
            if self._result is None:
                self._result = result
                if forget:
                    with contextlib.suppress(SupervisorError):  # the next supervisor will not know it either
                        self._supervisor.forget(self.id)
            return self._result


def _another_user(user: str) -> bool:
    """Whether ``user`` is an account of the host other than herder's own (an unknown one is refused
    by the supervisor: it does not matter here)."""
    try:
        return pwd.getpwnam(user).pw_uid != os.geteuid()
    except KeyError:
        return False


def _supervisor_of(ctx: TaskContext) -> Supervisor:
    if not isinstance(ctx.supervisor, Supervisor):
        raise DriverError("no process supervisor in the task's context")
    return ctx.supervisor


def _reporter(ctx: TaskContext) -> Callable[[str], None]:
    """What tells the task, in an event, of something it planted among its log files."""
    return functools.partial(ctx.emit_event, events.UNSAFE_LOG_FILE)


def _report_dropped(ctx: TaskContext, dropped: Dropped) -> None:
    """Tell the task, in an event, of output its log files could not take (the disk is full, say)."""
    ctx.emit_event(events.LOGS_DROPPED, dropped.message, **dropped.details())


def _abandon(supervisor: Supervisor, id: str) -> None:
    """Make sure a process whose start went unanswered (the connection broke) does not run.

    It may have started all the same; the start is tried again under another
    id, so this one must not stay behind.
    """
    with contextlib.suppress(SupervisorError):
        if supervisor.attach(id) is not None:
            supervisor.stop(id, signal.SIGKILL, 0)
            supervisor.wait(id, ABANDON_WAIT)
            supervisor.forget(id)


def _kill_orphan(pid: int, start_time: int, cgroup: str | None) -> None:
    """Kill the process that started as ``pid`` at ``start_time``, with its group, if it still runs,
    and every process of its ``cgroup`` (which is then removed).

    No supervisor watches it any more, so its output goes nowhere and a new
    run of the task would run beside it. Waits a little for it to be gone.
    """
    if cgroup is not None:
        _remove_cgroup(Cgroup(Path(cgroup)))
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # no such process
    try:
        # Checked after opening the pidfd, which names this very process even if its pid is reused.
        if not process_alive(pid, start_time):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # It led its own group (the supervisor started it in a new session): take its children too.
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], ORPHAN_KILL_WAIT)  # readable once it has exited
    except ProcessLookupError:
        pass  # it exited meanwhile
    finally:
        os.close(pidfd)


def _remove_cgroup(cgroup: Cgroup) -> None:
    """Kill the processes of an orphan's cgroup and remove it, waiting a little for them to be out."""
    deadline = time.monotonic() + ORPHAN_KILL_WAIT
    try:
        while not cgroup.release() and time.monotonic() < deadline:
            time.sleep(0.01)
    except OSError:
        pass  # not ours to remove after all (gone, or not a cgroup): the process itself is still killed below
