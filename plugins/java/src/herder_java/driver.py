"""The java driver: a JVM application from a jar or a main class, as Nomad's java driver runs it.

The command line is ``java [jvm_options] [-Xmx<memory>m] [-cp class_path]
(-jar jar_path | class) [args]``. Where herder-exec is installed and its
fingerprint is healthy (and ``[plugin.java] isolation`` is not ``none``),
the JVM runs inside exec's runc container through herder-exec's public
isolation API (:mod:`herder_exec.isolation`), with the JDK's directory
bound read-only beside exec's own set, exec's limits and user; elsewhere,
where plain processes are allowed (``allow_unisolated``: only where raw_exec
is enabled, in the agent), it runs as a plain process of the host, in its own
process group, through the supervisor. Either way it outlives herder and is found again through
``herder_task_recover``, SIGTERM stops it by default, so that its
shutdown hooks run, and in a group with a network of its own it runs in the
allocation's namespace (``ctx.network``).
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herder import (
    DriverCapabilities,
    DriverError,
    ExecResult,
    ExecSession,
    Fingerprint,
    Task,
    TaskContext,
    TaskHandle,
    hookimpl,
)
from herder.sdk import HostCommands, SupervisedProcess, resolve_in_task_dir
from herder_java.config import TASK_SCHEMA, PluginConfig, TaskConfig, java_home
from herder_java.handle import DESCRIPTIONS, JavaHandle, Mode
from herder_java.version import JavaVersion, parse_version

if TYPE_CHECKING:
    from herder_exec.isolation import Isolation

try:
    from herder_exec import isolation as exec_isolation
except ImportError:  # herder-exec is optional: without it every JVM is a plain process
    exec_isolation = None  # type: ignore[assignment]

DEFAULT_SIGNAL = signal.SIGTERM
"""The JVM runs its shutdown hooks on SIGTERM (and SIGINT, SIGHUP); Nomad's java driver sends SIGTERM too."""
VERSION_TIMEOUT = 4.0
"""How long ``java -version`` may take; it runs beside exec's fingerprint, within the 5 s a fingerprint has."""
INSTALL_HINT = "install herder-exec (pip install 'herder-java[isolation]')"


class JavaDriver:
    """The ``java`` driver; herder creates it with the ``[plugin.java]`` table."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = PluginConfig.from_mapping(config)
        # Even with isolation = none: a task an earlier configuration isolated is still recovered and removed.
        self.isolation: Isolation | None = None
        if exec_isolation is not None:
            self.isolation = exec_isolation.Isolation(self.config.exec)
        # A plain JVM's environment and what runs beside it: raw_exec's.
        self.host = HostCommands()
        self._versions: dict[tuple[str, int, int], JavaVersion] = {}
        self._prepared: dict[tuple[str, str], Mode] = {}
        self._lock = threading.Lock()

    # -- the JVM and the isolation -------------------------------------------------------------

    def _java(self) -> Path:
        """:raises DriverError: there is no java."""
        binary = self.config.java_binary()
        if binary is None:
            raise DriverError(f"java not found: {self.config.describe_java()}")
        return binary

    def _mode(self) -> tuple[Mode, str]:
        """How tasks run now, and why; the fingerprint of exec is its own (its probe runs once).

        :raises DriverError: the container is not available, and ``isolation = "exec"`` or plain
            processes are not allowed (``allow_unisolated``).
        """
        if self.config.isolation == "none":
            return self._unisolated("[plugin.java] isolation = none")
        if self.isolation is None:
            if self.config.isolation == "exec":
                raise DriverError(f"isolation = exec, but herder-exec is not installed: {INSTALL_HINT}")
            return self._unisolated(f"herder-exec is not installed ({INSTALL_HINT})")
        exec_fingerprint = self.isolation.fingerprint()
        if exec_fingerprint.detected and exec_fingerprint.healthy:
            return "exec", "herder-exec is healthy"
        if self.config.isolation == "exec":
            raise DriverError(f"isolation = exec, but herder-exec cannot isolate: {exec_fingerprint.description}")
        return self._unisolated(f"herder-exec cannot isolate: {exec_fingerprint.description}")

    def _unisolated(self, why: str) -> tuple[Mode, str]:
        """Plain processes, because of ``why``, where they are allowed.

        :raises DriverError: they are not (no more isolation than raw_exec's, where raw_exec is disabled).
        """
        if not self.config.allow_unisolated:
            raise DriverError(f"JVMs would run without isolation ({why}), which this client does not allow: "
                              f"set [plugin.java] allow_unisolated = true (in the agent, enabling raw_exec "
                              f"does too), or make herder-exec available")
        return "none", why

    # -- driver description ----------------------------------------------------------------------

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        try:
            binary = self._java()
            key = _identity(binary)
        except (DriverError, OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
            return Fingerprint(detected=False, healthy=False, description=str(exc))
        with self._lock:
            known = self._versions.get(key)
        # java -version starts a JVM: it runs while exec's fingerprint (runc, its probe) does.
        probe = None if known is not None else _start_version(binary)
        try:
            mode, why = self._mode()
        except DriverError as exc:
            mode, why, unavailable = "exec", "", str(exc)
        else:
            unavailable = ""
        if known is None:
            try:
                known = _finish_version(binary, probe)
            except DriverError as exc:
                return Fingerprint(detected=False, healthy=False, description=str(exc))
            with self._lock:
                self._versions[key] = known
        attributes = {**known.attributes(), "driver.java.isolation": mode}
        if unavailable:
            return Fingerprint(detected=True, healthy=False, description=unavailable, attributes=attributes)
        return Fingerprint(detected=True, healthy=True, description=f"healthy: {DESCRIPTIONS[mode]} ({why})",
                           attributes=attributes)

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return TASK_SCHEMA

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        """Either way the JVM joins its allocation's network namespace: exec's container by runc's network
        namespace ``path``, a plain JVM started in it by the supervisor. An isolated JVM mounts host volumes
        in its container; a plain one cannot."""
        try:
            mode, _ = self._mode()
        except DriverError:
            mode = "none"
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}), volume_mounts=mode == "exec")

    # -- task start ----------------------------------------------------------------------------

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        """An isolated task sees its directories where the container mounts them (``/local`` ...)."""
        mode, _ = self._mode()
        with self._lock:
            self._prepared[(ctx.alloc_id, ctx.task_name)] = mode
        if mode == "exec":
            assert self.isolation is not None
            self.isolation.prepare(ctx)

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        config = TaskConfig.from_mapping(task.config)
        binary = self._java()
        with self._lock:  # the way prestart prepared the environment for (NOMAD_TASK_DIR=/local or not)
            mode = self._prepared.pop((ctx.alloc_id, ctx.task_name), None) or self._mode()[0]
        if config.ignored:
            ctx.emit_event("Driver", f"ignoring config keys herder's java driver does not implement: "
                                     f"{', '.join(config.ignored)}", ignored=list(config.ignored))
        if mode == "exec":
            assert self.isolation is not None
            isolation = self.isolation

            def seen(path: Path) -> str:
                return isolation.task_path(ctx, path)

            argv = self._argv(binary, config, task, ctx, seen, isolation)
            cwd = self._path(ctx, "work_dir", config.work_dir, seen, isolation) if config.work_dir else "/"
            handle: TaskHandle = isolation.start(task, ctx, argv, read_only=[java_home(binary)], cwd=cwd,
                                                 default_signal=DEFAULT_SIGNAL)
        else:
            if ctx.mounts:
                raise DriverError("volume_mount needs an isolated JVM (herder-exec), and this one is not isolated")
            argv = self._argv(binary, config, task, ctx, str, None)
            tmp = [] if config.sets("-Djava.io.tmpdir=") else [f"-Djava.io.tmpdir={ctx.task_dir.tmp_dir}"]
            work_dir = self._path(ctx, "work_dir", config.work_dir, str, None) if config.work_dir else None
            handle = SupervisedProcess.spawn(task, ctx, [argv[0], *tmp, *argv[1:]],
                                             env=self.host.environment(task, ctx),
                                             cwd=Path(work_dir) if work_dir else ctx.task_dir.dir,
                                             user=task.user or None, host_paths=True, default_signal=DEFAULT_SIGNAL,
                                             netns=ctx.network.path if ctx.network is not None else None)
        ctx.emit_event("Driver", DESCRIPTIONS[mode], isolation=mode)
        return JavaHandle(handle, mode)

    def _argv(self, binary: Path, config: TaskConfig, task: Task, ctx: TaskContext, seen: Callable[[Path], str],
              isolation: Isolation | None) -> list[str]:
        """``java [jvm_options] [-Xmx] [-cp] (-jar jar | class) [args]``, paths as the JVM sees them
        (``seen`` turns a host path into that).

        :raises DriverError: a path is not in the task directory, is missing, or (isolated) cannot be seen.
        """
        argv = [str(binary), *config.jvm_options]
        if not config.sets_max_heap():
            argv.append(f"-Xmx{task.resources.memory}m")
        if config.class_path:
            entries = [self._path(ctx, "class_path", entry, seen, isolation, wildcard=True)
                       for entry in config.class_path.split(":") if entry]
            argv += ["-cp", ":".join(entries)]
        if config.jar_path:
            argv += ["-jar", self._path(ctx, "jar_path", config.jar_path, seen, isolation)]
        else:
            assert config.main_class is not None  # the schema wants one of the two
            argv.append(config.main_class)
        return [*argv, *config.args]

    @staticmethod
    def _path(ctx: TaskContext, key: str, given: str, seen: Callable[[Path], str], isolation: Isolation | None, *,
              wildcard: bool = False) -> str:
        """A path of the config: relative to the task directory (or, isolated, as the task sees it,
        ``/local/app.jar``), never outside it, and there."""
        where = f"job.group[{ctx.group_name}].task[{ctx.task_name}].config.{key}"
        name = given[:-2] if wildcard and given.endswith("/*") else given
        host = isolation.host_path(ctx, name) if isolation is not None and name.startswith("/") else None
        try:
            path = host if host is not None else resolve_in_task_dir(ctx.task_dir, name)
            if not path.exists():
                raise DriverError(f"{where}: {given} does not exist in the task directory ({path})")
            found: str = seen(path)
        except ValueError as exc:
            raise DriverError(f"{where}: {exc}") from None
        return f"{found}/*" if name != given else found

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        if state.get("isolation") == "exec":
            if self.isolation is None:
                raise DriverError(f"the task runs in herder-exec's container, but herder-exec is not installed: "
                                  f"{INSTALL_HINT}")
            recovered = self.isolation.recover(ctx, state, default_signal=DEFAULT_SIGNAL)
            return None if recovered is None else JavaHandle(recovered, "exec")
        process = SupervisedProcess.recover(ctx, state, default_signal=DEFAULT_SIGNAL)
        return None if process is None else JavaHandle(process, "none")

    # -- running task ----------------------------------------------------------------------------

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        """In the container when the JVM is isolated, else beside it in the task directory, as the task's user."""
        if not isinstance(handle, JavaHandle):
            raise DriverError(f"not a task of the java driver: {handle!r}")
        if handle.isolation == "exec":
            assert self.isolation is not None  # recover and start give "exec" handles only with it
            return self.isolation.exec(handle.inner, command, timeout)
        return self.host.exec(task, ctx, command, timeout)

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        """In the container when the JVM is isolated (``runc exec``, as herder-exec's own tasks); beside a
        plain JVM in the task directory, as the task's user, as raw_exec."""
        if not isinstance(handle, JavaHandle):
            raise DriverError(f"not a task of the java driver: {handle!r}")
        if handle.isolation == "exec":
            assert self.isolation is not None  # recover and start give "exec" handles only with it
            return self.isolation.exec_session(handle.inner, command, tty)
        return self.host.exec_session(task, ctx, command, tty)

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        """An isolated task's container, cgroup and bundle go; a plain process leaves nothing behind."""
        if self.isolation is not None:
            self.isolation.cleanup(ctx)
        elif any(kind == "container" for kind, _ in ctx.created.items()):
            raise DriverError(f"the task ran in herder-exec's container, which only herder-exec can remove: "
                              f"{INSTALL_HINT}")


def _identity(binary: Path) -> tuple[str, int, int]:
    """The binary as it is now: another JDK installed in its place gives another identity."""
    stat = binary.stat()
    return str(binary), stat.st_mtime_ns, stat.st_size


def _start_version(binary: Path) -> subprocess.Popen[str] | None:
    try:
        return subprocess.Popen([str(binary), "-version"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
    except OSError:
        return None


def _finish_version(binary: Path, probe: subprocess.Popen[str] | None) -> JavaVersion:
    """:raises DriverError: java did not start, failed, took too long, or printed no version."""
    if probe is None:
        raise DriverError(f"{binary} cannot be run")
    try:
        output, _ = probe.communicate(timeout=VERSION_TIMEOUT)
    except subprocess.TimeoutExpired:
        probe.kill()
        probe.communicate()
        raise DriverError(f"{binary} -version did not answer within {VERSION_TIMEOUT:g}s") from None
    if probe.returncode != 0:
        last = output.strip().splitlines()[-1:] or [f"exit code {probe.returncode}"]
        raise DriverError(f"{binary} -version failed: {last[0]}")
    try:
        return parse_version(output)
    except ValueError as exc:
        raise DriverError(f"{binary}: {exc}") from None

