"""herder-exec's public API: exec's isolation, for any driver that runs a program of the host.

The exec driver is built on this module, and another driver (herder-java)
uses it to run its own program the same way: in a runc container with the
host's system directories read-only, the task's directories at ``/local``,
``/secrets``, ``/tmp`` and ``/alloc``, the task's user (default
``nobody``), exec's memory, cpu and pids limits, in the allocation's
network namespace when it has one (``ctx.network``), supervised so that it
outlives herder. This module is the only part of herder-exec other
distributions may import; the rest is internal and may change.

::

    from herder_exec.isolation import Isolation

    isolation = Isolation(config)              # keys of [plugin.exec]; {} for exec's defaults
    isolation.fingerprint()                    # exec's own: healthy when runc can run a container here
    isolation.prepare(ctx)                     # prestart: the task's variables name /local ...
    handle = isolation.start(task, ctx, argv, read_only=[jdk], cwd="/local")
    isolation.exec(handle, ["/bin/sh", "-c", "..."], timeout)
    session = isolation.exec_session(handle, ["/bin/sh"], tty=True)   # interactive
    isolation.recover(ctx, handle.state())     # after herder restarted
    isolation.cleanup(ctx)                     # container, cgroup and bundle; idempotent

One task of an allocation has one container (``herder-<alloc id>-<task>``),
whichever driver starts it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from herder import DriverError, ExecResult, ExecSession, Fingerprint, RecoverableError, Task, TaskContext
from herder.sdk import ExecProcess, SupervisedProcess, give_tree, kill_session, run_capped, set_task_dirs
from herder_exec import bundle, cgroups, netfiles
from herder_exec.config import PluginConfig
from herder_exec.handle import ExecHandle
from herder_exec.mounts import host_volume_mounts
from herder_exec.runc import Runc, RuncError, exec_argv
from herder_exec.session import RuncExecSession

__all__ = ["ExecHandle", "Isolation", "container_id"]

DEFAULT_USER = "nobody"
BUNDLE_DIR = "bundle"
TASK_DIRS = {"/local": "local_dir", "/secrets": "secrets_dir", "/tmp": "tmp_dir", "/alloc": "alloc_dir"}
"""Where the task sees its directories: the ``TaskDir`` field bound there."""
OWNED_DIRS = ("local_dir", "secrets_dir", "tmp_dir")
"""The task's own directories, given to its user (the shared alloc dir belongs to every task)."""

VERSION_TIMEOUT = 2.0
PROBE_TIMEOUT = 2.5
"""The fingerprint's probe container; with ``runc --version`` it stays within the 5 s a fingerprint has."""
EXEC_GRACE = 2.0
"""How long past its timeout an exec's ``runc exec`` may take to end once the command was killed."""

_INVALID_ID = re.compile(r"[^\w+.-]")

_PROBE_LOCK = threading.Lock()
_PROBES: dict[PluginConfig, str | None] = {}
"""The probe container's result for each configuration, once per process: why it failed, or None."""


def container_id(ctx: TaskContext) -> str:
    """``herder-<alloc id>-<task>``: one per task of an allocation, the same across restarts and herder
    processes, so that a container a crash left behind is found again. runc allows ``[\\w+.-]``."""
    return _INVALID_ID.sub("_", f"herder-{ctx.alloc_id}-{ctx.task_name}")


class Isolation:
    """exec's isolation with the configuration ``config`` (the keys of ``[plugin.exec]``).

    :raises ValueError: ``config`` has an unknown key or a value of the wrong kind.
    """

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = PluginConfig.from_mapping(config)

    # -- what it needs ----------------------------------------------------------------------

    def _runc(self) -> Runc | None:
        binary = shutil.which(self.config.runc)
        return Runc(str(Path(binary).absolute()), self.config.runc_root) if binary else None

    def runc(self) -> Runc:
        """:raises DriverError: runc is not there."""
        runc = self._runc()
        if runc is None:
            raise DriverError(f"runc not found: {self.config.runc}")
        return runc

    @staticmethod
    def hierarchy() -> cgroups.Hierarchy:
        """:raises DriverError: no usable cgroups."""
        try:
            found = cgroups.detect()
        except OSError as exc:
            raise DriverError(f"cannot read the cgroup mounts: {exc}") from exc
        if found is None:
            raise DriverError("no cgroup memory controller is mounted")
        return found

    def fingerprint(self) -> Fingerprint:
        """Whether tasks can be isolated here: runc found and working, cgroups, root, and a probe
        container that ran (once; its result is kept). Attributes ``driver.exec.runc.version`` and
        ``driver.exec.cgroup.version``. Never raises."""
        runc = self._runc()
        if runc is None:
            return Fingerprint(detected=False, healthy=False, description=f"runc not found: {self.config.runc}")
        try:
            version = runc.version(VERSION_TIMEOUT)
        except RuncError as exc:
            return Fingerprint(detected=False, healthy=False, description=f"{runc.binary} does not work: {exc}")
        attributes = {"driver.exec.runc.version": version}
        try:
            hierarchy = self.hierarchy()
        except DriverError as exc:
            return Fingerprint(detected=True, healthy=False, description=str(exc), attributes=attributes)
        attributes["driver.exec.cgroup.version"] = str(hierarchy.version)
        if os.geteuid() != 0:
            return Fingerprint(detected=True, healthy=False, description="the exec driver needs root",
                               attributes=attributes)
        error = self._probe(runc, hierarchy)
        if error:
            return Fingerprint(detected=True, healthy=False, description=f"runc cannot run a container: {error}",
                               attributes=attributes)
        return Fingerprint(detected=True, healthy=True, description="healthy", attributes=attributes)

    def _probe(self, runc: Runc, hierarchy: cgroups.Hierarchy) -> str | None:
        """Run a trivial container once, as a task would run (namespaces, mounts, cgroup, user): the first
        result is kept for the process (shared by every instance with the same configuration: the exec
        driver and the java driver's isolation), so the fingerprint every 30 s costs nothing. Why it
        failed, or None."""
        with _PROBE_LOCK:
            if self.config not in _PROBES:
                _PROBES[self.config] = self._run_probe(runc, hierarchy)
            return _PROBES[self.config]

    def _run_probe(self, runc: Runc, hierarchy: cgroups.Hierarchy) -> str | None:
        name = f"herder-probe-{os.getpid()}-{secrets.token_hex(4)}"
        cgroup = cgroups.TaskCgroup(hierarchy, f"{self.config.cgroup_parent}/{name}")
        with tempfile.TemporaryDirectory(prefix="herder-exec-probe-") as directory:
            try:
                user = bundle.User.lookup(DEFAULT_USER)
                cgroup.create(16)
                bundle.write(Path(directory), bundle.spec(
                    ["/bin/sh", "-c", "exit 0"], {}, user, task_dirs={}, cgroups_path=cgroup.runc_path,
                    cpu_shares=2, pids_limit=self.config.default_pids_limit))
                runc.call("run", "--bundle", directory, *self._run_options(), name, timeout=PROBE_TIMEOUT)
            except (RuncError, OSError, KeyError) as exc:
                return str(exc)
            finally:
                with contextlib.suppress(RuncError):
                    runc.delete(name)
                with contextlib.suppress(OSError):
                    cgroup.remove()
        return None

    def _run_options(self) -> list[str]:
        # No session keyring: the task must not share herder's (nor need one of its own).
        return ["--no-new-keyring", *(("--no-pivot",) if self.config.no_pivot else ())]

    # -- where the task sees its files --------------------------------------------------------

    @staticmethod
    def prepare(ctx: TaskContext) -> None:
        """For ``herder_task_prestart``: the task's variables name its directories where the container
        mounts them (``NOMAD_TASK_DIR=/local`` ...).

        :raises DriverError: the data dir is in a directory the container binds (see :func:`check_data_dir`).
        """
        check_data_dir(ctx)
        set_task_dirs(ctx.env, "/alloc", "/local", "/secrets")

    @staticmethod
    def task_path(ctx: TaskContext, host_path: Path) -> str:
        """Where the task sees ``host_path``, a path in one of its directories (``/local/app.jar``).

        :raises ValueError: the path is in none of the directories the container mounts.
        """
        resolved = host_path.resolve()
        for target, field in TASK_DIRS.items():
            directory: Path = getattr(ctx.task_dir, field).resolve()
            if resolved.is_relative_to(directory):
                return str(PurePosixPath(target, resolved.relative_to(directory)))
        raise ValueError(f"{host_path} is not in local/, secrets/, tmp/ or alloc/ of the task directory, "
                         "all that an isolated task sees")

    @staticmethod
    def host_path(ctx: TaskContext, task_path: str) -> Path | None:
        """The host's path of ``task_path`` as the task sees it (``/local/app.jar``); None when it
        is not in one of the task's directories."""
        path = PurePosixPath(task_path)
        for target, field in TASK_DIRS.items():
            if path.is_relative_to(target):
                directory: Path = getattr(ctx.task_dir, field)
                return directory.joinpath(path.relative_to(target))
        return None

    # -- the task -----------------------------------------------------------------------------

    def start(self, task: Task, ctx: TaskContext, argv: Sequence[str], *, read_only: Sequence[Path] = (),
              cwd: str = "/", default_signal: int = signal.SIGINT, pid_mode: str = "private",
              ipc_mode: str = "private", capabilities: Sequence[str] = bundle.CAPABILITIES) -> ExecHandle:
        """Run ``argv`` (paths as the task sees them) in the task's container, supervised.

        ``read_only``: directories of the host the task also sees, where they
        are, read-only (a runtime the program needs). ``cwd``: the working
        directory, as the task sees it. ``default_signal``: how the task is
        stopped when its ``kill_signal`` is not set. The task runs as
        ``task.user`` (default ``nobody``) with ``ctx.env`` and a default
        ``PATH``; its memory limit is ``task.resources.memory`` MiB, its cpu
        shares ``task.resources.cpu``, its CPUs the cores reserved for it
        (``ctx.cores``), if any. ``pid_mode`` and ``ipc_mode``: ``host``
        shares the host's namespace, where the plugin configuration allows it
        (``allow_pid_mode_host``, ``allow_ipc_mode_host``). ``capabilities``:
        the task's bounding set (``CAP_CHOWN`` ...).

        With ``ctx.network`` (the allocation's namespace), the container joins
        that namespace instead of sharing the host's network, its hostname is
        the network's, and the network's ``dns`` and ``hostname`` become its
        ``/etc/resolv.conf`` and ``/etc/hosts``.

        :raises DriverError: no such user, a host namespace not allowed, no runc, no cgroups, the data dir in a
            directory the container binds, or the container cannot be prepared.
        :raises RecoverableError: a container a crash left behind cannot be removed yet.
        """
        try:
            user = bundle.User.lookup(task.user or DEFAULT_USER)
        except KeyError:
            raise DriverError(f"user {task.user or DEFAULT_USER!r} does not exist on this host") from None
        check_data_dir(ctx, read_only)
        host_namespaces = self._host_namespaces(pid_mode, ipc_mode)
        runc, hierarchy = self.runc(), self.hierarchy()
        container = container_id(ctx)
        cgroup = cgroups.TaskCgroup(hierarchy, f"{self.config.cgroup_parent}/{container}")
        where = ctx.task_dir.dir / BUNDLE_DIR
        self._remove(runc, container, cgroup)  # a container of an earlier run a crash left behind
        for field in OWNED_DIRS:
            give_tree(getattr(ctx.task_dir, field), (user.uid, user.gid))
        ctx.created.add("container", container)
        ctx.created.add("cgroup", cgroup.relative)
        ctx.created.add("bundle", str(where))
        network = ctx.network
        # The network's /etc files, in the bundle (root's alone: the task cannot change them) by their names.
        etc = netfiles.etc_files(network) if network is not None else {}
        try:
            bundle.write(where, bundle.spec(
                argv, ctx.env, user,
                task_dirs={target: getattr(ctx.task_dir, field) for target, field in TASK_DIRS.items()},
                cgroups_path=cgroup.runc_path, cpu_shares=task.resources.cpu,
                pids_limit=self.config.default_pids_limit, read_only=read_only, cwd=cwd,
                capabilities=capabilities, host_namespaces=host_namespaces, cpus=ctx.cores,
                netns=network.path if network is not None else None,
                hostname=network.hostname if network is not None else "",
                files={path: where / PurePosixPath(path).name for path in etc},
                volumes=host_volume_mounts(ctx.mounts)),
                files={PurePosixPath(path).name: text for path, text in etc.items()})
            cgroup.create(task.resources.memory)
        except OSError as exc:
            raise DriverError(f"cannot prepare the container: {exc}") from exc
        command = runc.argv("run", "--bundle", str(where), *self._run_options(), container)
        proc = SupervisedProcess.spawn(task, ctx, command, env={"PATH": os.environ.get("PATH", bundle.DEFAULT_PATH)},
                                       cwd=where, default_signal=default_signal)
        return ExecHandle(proc, runc, container, where, cgroup, default_signal=default_signal)

    def _host_namespaces(self, pid_mode: str, ipc_mode: str) -> list[str]:
        """The namespaces shared with the host.

        :raises DriverError: a mode the plugin configuration does not allow, or no mode at all.
        """
        shared: list[str] = []
        for kind, mode, allowed in (("pid", pid_mode, self.config.allow_pid_mode_host),
                                    ("ipc", ipc_mode, self.config.allow_ipc_mode_host)):
            if mode == "host" and not allowed:
                raise DriverError(f"{kind}_mode \"host\" is not allowed on this node "
                                  f"([plugin.exec] allow_{kind}_mode_host)")
            if mode not in ("private", "host"):
                raise DriverError(f"{kind}_mode must be \"private\" or \"host\", not {mode!r}")
            if mode == "host":
                shared.append(kind)
        return shared

    @staticmethod
    def _remove(runc: Runc, container: str, cgroup: cgroups.TaskCgroup) -> None:
        """Remove the container and its cgroup, whatever state they are in; nothing when they are gone.

        :raises RecoverableError: the cgroup still holds processes (they may be on their way out).
        """
        if runc.known(container):
            runc.delete(container)
        try:
            cgroup.remove()
        except OSError as exc:
            raise RecoverableError(f"cannot remove cgroup {cgroup.relative}: {exc}") from exc

    def recover(self, ctx: TaskContext, state: Mapping[str, Any],
                default_signal: int = signal.SIGINT) -> ExecHandle | None:
        """The task of a handle's ``state()`` again, after herder restarted; None when it is gone (then
        whatever is left of its container is removed, so that the task never runs twice)."""
        container, where, relative = state.get("container"), state.get("bundle"), state.get("cgroup")
        if not isinstance(container, str) or not isinstance(where, str):
            return None
        runc = self.runc()
        cgroup = cgroups.TaskCgroup(self.hierarchy(), relative or f"{self.config.cgroup_parent}/{container}")
        proc = SupervisedProcess.recover(ctx, state, default_signal=default_signal)
        if proc is None:
            # No supervisor knows runc's process: it was killed, but the container's init, in a session
            # of its own, may run on. The task must not run twice.
            runc.delete(container)
            return None
        return ExecHandle(proc, runc, container, Path(where), cgroup, default_signal=default_signal)

    def exec(self, handle: object, command: Sequence[str], timeout: float) -> ExecResult:
        """``runc exec``: ``command`` in the running task's container, as its user, with its environment.

        The command's process is not a child of ``runc exec`` as the host
        sees it (runc puts it in a session of its own), so at the timeout its
        session is killed by the pid runc wrote, which ends ``runc exec`` and
        closes the output.

        :raises TimeoutError: the command outlived ``timeout``.
        :raises DriverError: ``handle`` is not one of :meth:`start`'s.
        """
        isolated = _isolated(handle)
        pid_file = _exec_pid_file(isolated)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _kill_pid_in(pid_file)

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            result = run_capped(exec_argv(self.runc(), isolated.id, list(command), str(pid_file)), env=None,
                                cwd=None, timeout=timeout + EXEC_GRACE)
        except TimeoutError:
            _kill_pid_in(pid_file)
            raise
        finally:
            timer.cancel()
            pid_file.unlink(missing_ok=True)
        if expired.is_set():
            raise TimeoutError(f"command timed out after {timeout:g}s")
        return result

    def exec_session(self, handle: object, command: Sequence[str], tty: bool) -> ExecSession:
        """``runc exec`` of an interactive ``command`` in the running task's container, as its user, with
        its environment: on a terminal (``runc exec --tty``, under a pseudo-terminal of herder's whose
        size runc passes on) or on pipes. Closing the session kills the command's whole session.

        :raises DriverError: ``handle`` is not one of :meth:`start`'s, or runc cannot be started.
        """
        isolated = _isolated(handle)
        pid_file = _exec_pid_file(isolated)
        argv = exec_argv(self.runc(), isolated.id, list(command), str(pid_file), tty=tty)
        try:
            process = ExecProcess.start(argv, env=None, cwd=None, tty=tty)
        except OSError as exc:
            raise DriverError(f"cannot run runc exec: {exc}") from exc
        return RuncExecSession(process, pid_file)

    def cleanup(self, ctx: TaskContext) -> None:
        """Remove the task's container, its cgroup and its bundle, as ``ctx.created`` names them (each
        step a no-op once done).

        :raises RecoverableError: a cgroup still holds processes.
        """
        created = ctx.created.items()
        containers = [value for kind, value in created if kind == "container"]
        cgroup_paths = [value for kind, value in created if kind == "cgroup"]
        if containers:
            runc = self.runc()
            for container in containers:
                runc.delete(container)
        if cgroup_paths:
            hierarchy = self.hierarchy()
            for relative in cgroup_paths:
                try:
                    cgroups.TaskCgroup(hierarchy, relative).remove()
                except OSError as exc:
                    raise RecoverableError(f"cannot remove cgroup {relative}: {exc}") from exc
        for kind, value in created:
            if kind == "bundle":
                shutil.rmtree(value, ignore_errors=True)


def check_data_dir(ctx: TaskContext, read_only: Sequence[Path] = ()) -> None:
    """Refuse a task whose task dir is in a directory of the host its container binds (``/usr`` ...,
    or one of ``read_only``): the task would see herder's data dir through that bind, the
    supervisor's socket directory with it.

    :raises DriverError: naming the data dir and the bind.
    """
    task_dir = ctx.task_dir.dir
    bound = bundle.binding(task_dir, read_only)
    if bound is None:
        return
    data_dir = task_dir.parents[2]  # <data_dir>/allocs/<alloc_id>/<task>
    resolved = os.path.realpath(data_dir)
    shown = str(data_dir) if resolved == str(data_dir) else f"{data_dir} ({resolved})"
    raise DriverError(f"the data dir {shown} is under {bound}, which exec binds into every task: "
                      "move the data dir")


def _isolated(handle: object) -> ExecHandle:
    """:raises DriverError: ``handle`` is not one of :meth:`Isolation.start`'s."""
    if not isinstance(handle, ExecHandle):
        raise DriverError(f"not a task isolated by herder-exec: {handle!r}")
    return handle


def _exec_pid_file(handle: ExecHandle) -> Path:
    """Where ``runc exec`` writes the host pid of a command it starts in ``handle``'s container: the
    bundle directory, root's, out of the task's sight."""
    return handle.bundle / f"exec-{secrets.token_hex(4)}.pid"


def _kill_pid_in(pid_file: Path) -> None:
    """SIGKILL the session of the command whose pid runc wrote into ``pid_file`` (nothing if none was
    written yet): runc starts it as a session leader, and what it started must end with it."""
    with contextlib.suppress(OSError, ValueError):
        kill_session(int(pid_file.read_text()), signal.SIGKILL)
