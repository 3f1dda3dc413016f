"""The driver conformance kit: herder's driver contract as tests a driver inherits.

A driver distribution's test module subclasses :class:`DriverContract`,
names its driver and says how to make a few tasks; pytest then runs every
``test_*`` method of the contract against it, through herder's real plugin
loader and hook facade (see :mod:`herder.testing.harness`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from herder.client.env import host_address
from herder.client.stats import StatsSampler
from herder.errors import DriverError
from herder.jobspec import validate_config
from herder.objects import (
    EXEC_OUTPUT_LIMIT,
    ExecResult,
    ExecSession,
    ExitResult,
    Fingerprint,
    TaskHandle,
    TaskStats,
)
from herder.plugins.hooks import Hooks
from herder.sdk import clean_env_var
from herder.testing import processes
from herder.testing.harness import (
    CALL_LIMIT,
    KILL_GRACE,
    PORT_RANGE,
    TASK_PATH,
    DidNotReturn,
    DriverHarness,
    DriverNotLoaded,
    TaskRun,
    bounded,
    call_own_hook,
    load_hooks,
)
from herder.testing.harness import diagnosis as _diagnosis
from herder.testing.network import NetworkContract
from herder.testing.plugin import HarnessFactory
from herder.testing.volumes import VolumeMountContract

READY_FILE = "READY_FILE"
SIGNAL_FILE = "SIGNAL_FILE"
"""Variables the kit adds to a task's environment after prestart: files in the task's local dir,
as the task sees them (``$NOMAD_TASK_DIR/ready``, ``$NOMAD_TASK_DIR/signal``)."""

READY_TIMEOUT = 30.0
"""How long a task has to write ``$READY_FILE`` (or to listen on its port) after its start."""
EXIT_TIMEOUT = 30.0
"""How long a task that exits by itself, or was killed, has to be seen exiting."""
OUTPUT_TIMEOUT = 10.0
"""How long output has to reach the log files after the task exited."""
SETTLE = 3.0
"""How long the processes of a killed task have to disappear from the host."""
KILL_TIMEOUT = 5.0
"""The ``kill_timeout`` of tasks that stop on their ``kill_signal``."""
FORCE_KILL_TIMEOUT = 1.0
"""The ``kill_timeout`` of the task that ignores its ``kill_signal``."""
EXEC_TIMEOUT = 10.0
"""The timeout of exec commands that end by themselves."""
EXEC_SHORT_TIMEOUT = 1.0
EXEC_GRACE = 4.0
"""How long past its timeout an exec has to raise TimeoutError."""
FINGERPRINT_DEADLINE = 5.0
"""How long the fingerprint may take: it runs when herder starts and every 30 s after."""

RUNS_UNTIL_KILLED = 'trap "exit 0" INT TERM; sleep 3600 & echo "$$ $!" > "$READY_FILE"; wait'
REPORTS_SIGNAL = ("trap 'echo INT > \"$SIGNAL_FILE\"; exit 0' INT; trap 'echo TERM > \"$SIGNAL_FILE\"; exit 0' TERM; "
                  'sleep 3600 & echo "$$ $!" > "$READY_FILE"; wait')
IGNORES_STOP_SIGNAL = 'trap "" INT TERM; sleep 3600 & echo "$$ $!" > "$READY_FILE"; wait'
USES_MEMORY = ('trap "exit 0" INT TERM; x=$(head -c {size} /dev/zero | tr "\\0" x); '
               'sleep 3600 & echo "$$ $!" > "$READY_FILE"; wait')
BUSY_LOOP = 'trap "exit 0" INT TERM; echo "$$" > "$READY_FILE"; while :; do :; done'
"""The default scenarios: no process of theirs comes and goes, so the host's view of them holds still."""
STATS_MEMORY_MIB = 64
"""What the task of the memory test allocates; it must show at least :data:`STATS_MEMORY_SHOWN_MIB`."""
STATS_MEMORY_SHOWN_MIB = 60
STATS_CPU_PERCENT = 20.0
"""What a busy loop must show at least, over one of the client's sampling intervals."""
STATS_INTERVAL = 0.5
"""Between two samples of the CPU test: shorter than the agent's ``collection_interval`` (1 s by default)."""

TaskConfig = dict[str, Any]
"""A task's ``config``, as a job file gives it to the driver."""


class DriverContract(NetworkContract, VolumeMountContract):
    """The contract's tests, for a driver named by a subclass.

    A subclass sets :attr:`driver` (the entry-point name) and, where needed,
    :attr:`plugin_config` and :attr:`supports_exec`, and provides task
    configurations. For a driver whose tasks can run a POSIX shell script,
    :meth:`shell` is enough: every scenario has a default built on it. A
    driver without a shell implements the scenario methods one by one
    (:meth:`exits_with`, :meth:`prints` and :meth:`runs_until_killed` are
    required; a scenario returning None skips the tests that need it)::

        from herder.testing import DriverContract

        class TestContract(DriverContract):
            driver = "raw_exec"

            def shell(self, script):
                return {"command": "/bin/sh", "args": ["-c", script]}

            def invalid_configs(self):
                return [({"command": 5}, "config.command"), ({}, "config.command")]

    Every test gets a fresh :class:`DriverHarness` (fixture ``harness``), in
    a temporary data dir, with dynamic ports from 2000-12000; whatever a test
    leaves running is killed and cleaned up after it.

    The scenario tasks talk to the kit through two files in their local
    directory, named by variables the kit adds to the environment after
    prestart, as the task sees the directory: ``$READY_FILE`` (once ready,
    a task writes pids into it) and ``$SIGNAL_FILE``. The exec tests run
    ``/bin/sh -c SCRIPT`` in a task of :meth:`runs_until_killed`.

    A driver that declares it joins its allocation's network namespace also
    gives :meth:`connects_to`, a task reaching ``127.0.0.1`` there (see
    :class:`herder.testing.network.NetworkContract`).
    """

    driver: ClassVar[str] = ""
    """The driver's entry-point name (``herder.drivers`` group)."""
    plugin_config: ClassVar[Mapping[str, Any]] = {}
    """The driver's ``[plugin.NAME]`` table."""
    supports_exec: ClassVar[bool] = True
    """False for a driver without ``herder_task_exec``: the kit then checks that herder says so clearly."""
    supports_exec_session: ClassVar[bool] = True
    """False for a driver without ``herder_task_exec_session`` (interactive exec): the kit then checks
    that herder says so clearly."""
    supports_stats: ClassVar[bool] = True
    """False for a driver whose handle's ``stats()`` cannot measure the task (a virtual machine's figures
    are the machine's): the kit then checks only that ``stats()`` answers, without raising."""

    # -- what the driver's test module provides --------------------------------------------------

    def shell(self, script: str) -> TaskConfig | None:
        """The config of a task running the POSIX ``sh`` script ``script`` (None: the driver cannot).

        The default scenarios use ``sh`` built-ins, ``sleep`` and ``printf``.
        """
        return None

    def exits_with(self, code: int) -> TaskConfig | None:
        """A task that exits with ``code`` at once. Required."""
        return self.shell(f"exit {code}")

    def prints(self, text: str) -> TaskConfig | None:
        """A task that writes ``text`` and a newline to its stdout, and exits 0. Required."""
        return self.shell(f"printf '%s\\n' {shlex.quote(text)}")

    def runs_until_killed(self) -> TaskConfig | None:
        """A task that runs until it is killed, and has a child process that does too. Required.

        Once both run, it writes ``"<leader pid> <child pid>"`` into
        ``$READY_FILE``, as the task sees the pids (see :meth:`host_pids`).
        Its ``kill_signal`` may stop it at once or not (it is killed after
        ``kill_timeout``).
        """
        return self.shell(RUNS_UNTIL_KILLED)

    def reports_signal(self) -> TaskConfig | None:
        """A task that, on SIGINT or SIGTERM, writes ``INT`` or ``TERM`` into ``$SIGNAL_FILE`` and
        exits; once its traps are in place, it writes its pid (and any child's) into ``$READY_FILE``.
        Optional."""
        return self.shell(REPORTS_SIGNAL)

    def ignores_stop_signal(self) -> TaskConfig | None:
        """A task that ignores SIGINT and SIGTERM, and has a child process that does too; it
        writes ``"<leader pid> <child pid>"`` into ``$READY_FILE`` once both run. Optional."""
        return self.shell(IGNORES_STOP_SIGNAL)

    def listens_on_port(self, label: str) -> TaskConfig | None:
        """A task that serves TCP on ``${NOMAD_PORT_<label>}`` (on every address of the task), until
        it is killed. Optional: None (the default) skips the test."""
        return None

    def uses_memory(self, mib: int) -> TaskConfig | None:
        """A task that allocates and touches ``mib`` MiB, keeps it, and then, as :meth:`runs_until_killed`,
        runs until killed with a child, having written both pids into ``$READY_FILE``. Optional."""
        return self.shell(USES_MEMORY.format(size=mib << 20))

    def busy_loop(self) -> TaskConfig | None:
        """A task that keeps a CPU busy until it is killed, having written its pid into ``$READY_FILE``.
        Optional."""
        return self.shell(BUSY_LOOP)

    def invalid_configs(self) -> list[tuple[TaskConfig, str]]:
        """Configs the driver's schema must refuse, each with the path the error must name
        (``({"command": 5}, "config.command")``). None given skips the test."""
        return []

    def broken_plugin_config(self) -> Mapping[str, Any] | None:
        """A ``[plugin.NAME]`` table the driver accepts but cannot work with (an unreachable daemon, a
        missing binary): its fingerprint must say so, without raising. Optional."""
        return None

    def host_pids(self, handle: TaskHandle, pids: tuple[int, ...]) -> Collection[int]:
        """The pids, as the host sees them, of the task's processes, while it runs.

        ``pids`` are those the task wrote into ``$READY_FILE``. The default
        returns them as they are: right for drivers whose tasks see the
        host's pids. A driver that isolates the task's pid namespace
        translates them, or lists the task's processes its own way (for a
        container, ``docker top``); one whose processes the host cannot see
        (a virtual machine) returns nothing, and the kit then checks only
        that the task ended.
        """
        return pids

    def require(self, available: bool, reason: str) -> None:
        """Called with whether the driver's fingerprint says it is detected and healthy:
        by default, skip the tests that need a running task when it is not."""
        if not available:
            pytest.skip(reason)

    # -- fixtures ---------------------------------------------------------------------------------

    @pytest.fixture
    def harness(self, driver_harness: HarnessFactory) -> DriverHarness:
        """A harness of the driver, which is detected and healthy (see :meth:`require`)."""
        harness = driver_harness(self._driver(), self.plugin_config)
        fingerprint = harness.fingerprint
        self.require(fingerprint.detected and fingerprint.healthy,
                     f"driver {self.driver} is not available: {fingerprint.description}")
        return harness

    # -- start, wait, exit code, output ----------------------------------------------------------------

    @pytest.mark.parametrize("code", [0, 3])
    def test_wait_returns_the_exit_code(self, harness: DriverHarness, code: int) -> None:
        run = self._start(harness, self._config(self.exits_with, code))
        handle = run.handle
        assert isinstance(handle, TaskHandle), f"herder_task_start returned {handle!r}, not a TaskHandle"
        assert isinstance(handle.id, str) and handle.id, f"the handle's id is {handle.id!r}, not a non-empty str"
        result = self._wait_exit(run)
        assert result.exit_code == code, f"a task exiting with {code} gave {result}"
        assert result.successful == (code == 0), result

    def test_output_goes_to_the_log_files(self, harness: DriverHarness) -> None:
        text = f"herder contract {uuid.uuid4().hex}"
        run = self._start(harness, self._config(self.prints, text))
        assert self._wait_exit(run).exit_code == 0
        path = run.log_file("stdout", 0)
        found = _poll(lambda: path.is_file() and text.encode() in path.read_bytes(), OUTPUT_TIMEOUT)
        assert found, f"{text!r} is not in {path} {OUTPUT_TIMEOUT:g}s after the task exited{_diagnosis(run)}"

    # -- kill -----------------------------------------------------------------------------------------

    def test_kill_leaves_nothing_of_the_task(self, harness: DriverHarness) -> None:
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        recorded = self._host_processes(run, self._ready(run, 2))
        assert self._poll_exit(run, 0.5) is None, "wait(0.5) gave a result while the task runs"
        self._kill(run, recorded)

    @pytest.mark.parametrize("kill_signal", ["SIGINT", "SIGTERM"])
    def test_kill_sends_the_kill_signal(self, harness: DriverHarness, kill_signal: str) -> None:
        run = self._start(harness, self._config(self.reports_signal, required=False), kill_signal=kill_signal,
                          kill_timeout=f"{KILL_TIMEOUT}s")
        recorded = self._host_processes(run, self._ready(run, 1))
        self._kill(run, recorded)
        path = run.local_file("signal")
        _poll(lambda: path.is_file() and bool(path.read_text().strip()), SETTLE)
        got = path.read_text().strip() if path.is_file() else ""
        expected = kill_signal.removeprefix("SIG")
        assert got.upper().removeprefix("SIG") == expected, \
            f"the task's kill_signal is {kill_signal}, but it got {got or 'nothing'}{_diagnosis(run)}"

    def test_kill_forces_after_kill_timeout(self, harness: DriverHarness) -> None:
        run = self._start(harness, self._config(self.ignores_stop_signal, required=False), kill_signal="SIGTERM",
                          kill_timeout=f"{FORCE_KILL_TIMEOUT}s")
        recorded = self._host_processes(run, self._ready(run, 2))
        elapsed = self._kill(run, recorded)
        assert elapsed >= 0.9 * FORCE_KILL_TIMEOUT, \
            f"kill returned after {elapsed:.2f}s: the task was not given its kill_timeout of {FORCE_KILL_TIMEOUT:g}s"
        assert run.result is not None and not run.result.successful, \
            f"a task killed by force gave {run.result}, a successful exit"

    # -- exec -----------------------------------------------------------------------------------------

    def test_exec_output_and_exit_code(self, harness: DriverHarness) -> None:
        run = self._exec_task(harness)
        ok = self._exec(run, "printf ok")
        assert (ok.exit_code, ok.output) == (0, b"ok")
        both = self._exec(run, "echo out; echo err >&2; exit 7")
        assert both.exit_code == 7, both
        assert b"out" in both.output and b"err" in both.output, f"stdout and stderr are not both in {both}"

    def test_exec_timeout_raises(self, harness: DriverHarness) -> None:
        run = self._exec_task(harness)
        command = ["/bin/sh", "-c", "sleep 30"]
        try:
            result = bounded(lambda: run.exec(command, EXEC_SHORT_TIMEOUT), EXEC_SHORT_TIMEOUT + EXEC_GRACE,
                             f"exec of {command} with a timeout of {EXEC_SHORT_TIMEOUT:g}s")
        except TimeoutError:
            pass
        else:
            pytest.fail(f"exec of {command} with a timeout of {EXEC_SHORT_TIMEOUT:g}s returned {result} "
                        "instead of raising TimeoutError", pytrace=False)
        assert self._poll_exit(run, 0.5) is None, "the task ended with the exec that timed out"

    def test_exec_output_is_capped(self, harness: DriverHarness) -> None:
        run = self._exec_task(harness)
        line, count = "0123456789abcdefghij", 5000
        printed = f"{line}\n".encode() * count
        result = self._exec(run, f"i=0; while [ $i -lt {count} ]; do echo {line}; i=$((i+1)); done")
        assert result.exit_code == 0, f"a command whose output is capped must still run to its end: {result}"
        assert len(result.output) == EXEC_OUTPUT_LIMIT, \
            f"{len(result.output)} bytes of output, not the first {EXEC_OUTPUT_LIMIT} of {len(printed)}"
        assert result.output == printed[:EXEC_OUTPUT_LIMIT]

    def test_exec_not_supported(self, harness: DriverHarness) -> None:
        if self.supports_exec:
            pytest.skip(f"driver {self.driver} supports exec")
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        self._ready(run, 2)
        with pytest.raises(DriverError, match=re.escape(f"driver {self.driver} does not support exec")):
            run.exec(["/bin/sh", "-c", "true"], EXEC_TIMEOUT)

    # -- interactive exec -----------------------------------------------------------------------------

    def test_exec_session_on_a_terminal(self, harness: DriverHarness) -> None:
        run = self._exec_session_task(harness)
        with _Session(run.exec_session(["/bin/sh"], tty=True)) as session:
            session.send(b"tty\n")
            session.expect(rb"/dev/pts/\d+", "`tty` in a shell on a terminal")
            session.send(b"echo $((6*7))\n")
            session.expect(rb"\b42\b", "the shell's answer to `echo $((6*7))`")
            session.send(b"exit 3\n")
            assert session.exit_code() == 3

    def test_exec_session_resizes_its_terminal(self, harness: DriverHarness) -> None:
        run = self._exec_session_task(harness)
        with _Session(run.exec_session(["/bin/sh"], tty=True)) as session:
            session.resize(width=123, height=45)

            def resized() -> bool:
                # Asked again until it shows: a runtime between herder and the command passes the
                # new size on when its SIGWINCH arrives, which may be after a first `stty size`.
                session.send(b"stty size\n")
                return session.shows(rb"\b45 123\b", STATS_INTERVAL)

            assert _poll(resized, READY_TIMEOUT, 0), \
                f"`stty size` never said 45 123 after a resize to 123x45; the session printed {session.stdout!r}"

    def test_exec_session_without_a_terminal(self, harness: DriverHarness) -> None:
        run = self._exec_session_task(harness)
        script = 'read line; echo "got $line"; echo oops >&2; cat; exit 4'
        with _Session(run.exec_session(["/bin/sh", "-c", script], tty=False)) as session:
            session.send(b"hello\n")
            session.expect(rb"got hello\n", "what the command read from its stdin")
            session.send(b"more\n")
            session.close_stdin()
            assert session.exit_code() == 4
            session.wait_ended()
            assert (bytes(session.stdout), bytes(session.stderr)) == (b"got hello\nmore\n", b"oops\n"), \
                "stdout and stderr must come apart, whole, when there is no terminal"

    def test_exec_session_close_ends_the_command(self, harness: DriverHarness) -> None:
        run = self._exec_session_task(harness)
        task_processes = processes.marked(run.marker)
        with _Session(run.exec_session(["/bin/sh", "-c", "echo started; sleep 3600"], tty=False)) as session:
            session.expect(rb"started", "the command's first line")
            command = {pid: start for pid, start in processes.marked(run.marker).items()
                       if pid not in task_processes}
            session.close()
            ended = session.session.wait(EXIT_TIMEOUT) is not None
            left = processes.wait_gone(command, EXIT_TIMEOUT)
            processes.kill(left)  # what a faulty driver leaves goes with the test that finds it
            assert ended, "a closed session's command did not end"
            assert not left, f"closing the session left its command running: {processes.describe(left)}"
        assert self._poll_exit(run, 0.5) is None, "the task ended with the exec session"

    def test_exec_session_close_ends_a_shells_jobs(self, harness: DriverHarness) -> None:
        """A shell on a terminal puts ``sleep 3600 &`` in a process group of its own (job control);
        closing the session must end it too, not only the shell's group."""
        run = self._exec_session_task(harness)
        before = processes.marked(run.marker)
        job = "sleep 3601"
        started: dict[int, int] = {}
        with _Session(run.exec_session(["/bin/sh"], tty=True)) as session:
            session.send(f"{job} &\n".encode())

            def sleeping() -> bool:
                started.clear()
                started.update((pid, at) for pid, at in processes.marked(run.marker).items() if pid not in before)
                return any(processes.command_line(pid) == job for pid in started)

            assert _poll(sleeping, OUTPUT_TIMEOUT), \
                f"`{job} &` did not start in the session's shell; it printed {bytes(session.stdout)!r}"
            groups = {os.getpgid(pid) for pid in processes.still_running(started)}
            assert len(groups) > 1, "the shell did not put its job in a process group of its own: the test cannot tell"
        left = processes.wait_gone(started, EXIT_TIMEOUT)
        processes.kill(left)  # what a faulty driver leaves goes with the test that finds it
        assert not left, f"closing the session left its shell's job running: {processes.describe(left)}"
        assert self._poll_exit(run, 0.5) is None, "the task ended with the exec session"

    def test_exec_session_not_supported(self, harness: DriverHarness) -> None:
        if self.supports_exec_session:
            pytest.skip(f"driver {self.driver} supports interactive exec")
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        self._ready(run, 2)
        with pytest.raises(DriverError, match=re.escape(f"driver {self.driver} does not support interactive exec")):
            run.exec_session(["/bin/sh"], tty=True)

    # -- resource usage -------------------------------------------------------------------------------

    def test_stats_show_memory(self, harness: DriverHarness) -> None:
        run, recorded = self._stats_task(harness, 2, self.uses_memory, STATS_MEMORY_MIB)
        # Asked until it shows: a cgroup's memory.stat is brought up to date by the kernel in the
        # background (every 2 s on recent kernels), so a reading just after the allocation may lag.
        self._watch_stats(run, recorded, lambda: self._stats(run),
                          lambda stats: (stats.memory_rss_bytes or 0) >= STATS_MEMORY_SHOWN_MIB << 20,
                          f"a task that allocated {STATS_MEMORY_MIB} MiB never showed memory_rss_bytes of at least "
                          f"{STATS_MEMORY_SHOWN_MIB} MiB")

    def test_stats_show_cpu(self, harness: DriverHarness) -> None:
        run, recorded = self._stats_task(harness, 1, self.busy_loop)
        handle, sampler = run.handle, StatsSampler()
        assert handle is not None
        self._watch_stats(run, recorded,
                          lambda: bounded(lambda: sampler.sample({"task": handle})["task"], CALL_LIMIT, "stats()"),
                          lambda stats: (stats.cpu_percent or 0.0) > STATS_CPU_PERCENT,
                          f"a busy loop never showed more than {STATS_CPU_PERCENT:g} % CPU")

    def test_stats_not_supported(self, harness: DriverHarness) -> None:
        if self.supports_stats:
            pytest.skip(f"driver {self.driver} measures its tasks")
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        self._ready(run, 2)
        self._stats(run)

    # -- state and recovery ---------------------------------------------------------------------------

    def test_state_is_json_serialisable(self, harness: DriverHarness) -> None:
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        self._ready(run, 2)
        assert run.handle is not None
        _through_json(run.handle.state())

    def test_recover_on_fresh_plugins(self, harness: DriverHarness) -> None:
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        recorded = self._host_processes(run, self._ready(run, 2))
        assert run.handle is not None
        started_id = run.handle.id
        state = _through_json(run.handle.state())
        harness.restart()
        handle = bounded(lambda: run.recover(state), CALL_LIMIT, "herder_task_recover")
        assert handle is not None, f"herder_task_recover on fresh plugins gave None for a running task ({state})"
        assert handle.id == started_id, f"the recovered handle's id is {handle.id!r}, not {started_id!r}"
        assert self._poll_exit(run, 0.5) is None, "wait(0.5) on the recovered handle gave a result: the task runs"
        assert processes.still_running(recorded) == recorded, "the task's processes ended on recovery"
        self._kill(run, recorded)

    # -- cleanup --------------------------------------------------------------------------------------

    @pytest.mark.parametrize("when", ["never_started", "after_exit", "after_kill"])
    def test_cleanup_is_idempotent(self, harness: DriverHarness, when: str) -> None:
        if when == "never_started":
            run = harness.task(self._config(self.exits_with, 0))
            run.prestart()
        elif when == "after_exit":
            run = self._start(harness, self._config(self.exits_with, 0))
            self._wait_exit(run)
        else:
            run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
            self._kill(run, self._host_processes(run, self._ready(run, 2)))
        bounded(run.cleanup, CALL_LIMIT, "herder_task_cleanup")
        bounded(run.cleanup, CALL_LIMIT, "herder_task_cleanup, called a second time")

    # -- fingerprint and configuration ------------------------------------------------------------------

    def test_fingerprint_is_quick_and_never_raises(self) -> None:
        self._fingerprint(load_hooks(self._driver(), self.plugin_config))

    def test_fingerprint_with_broken_config(self) -> None:
        config = self.broken_plugin_config()
        if config is None:
            pytest.skip(f"{type(self).__name__}.broken_plugin_config() gives none")
        try:
            hooks = load_hooks(self._driver(), config)
        except DriverNotLoaded as exc:
            pytest.fail(f"{exc}; broken_plugin_config() must be a configuration the driver accepts "
                        "but cannot work with", pytrace=False)
        fingerprint = self._fingerprint(hooks)
        assert fingerprint is not None and not (fingerprint.detected and fingerprint.healthy), \
            f"with {dict(config)}, the fingerprint says the driver is healthy: {fingerprint}"

    def test_config_errors_name_their_path(self) -> None:
        cases = self.invalid_configs()
        if not cases:
            pytest.skip(f"{type(self).__name__}.invalid_configs() gives none")
        schema = load_hooks(self._driver(), self.plugin_config).task_schema(self.driver)
        assert schema is not None, "the driver gives no config schema, so no config can be invalid"
        for config, path in cases:
            errors = validate_config(TASK_PATH, config, schema)
            assert any(error.startswith(f"{TASK_PATH}.{path}: ") for error in errors), \
                f"config {config}: no error names {path}: {errors}"
        valid = self._config(self.exits_with, 0)
        assert validate_config(TASK_PATH, valid, schema) == [], f"exits_with(0) gives an invalid config {valid}"

    # -- ports ------------------------------------------------------------------------------------------

    def test_port_variables_are_set(self, harness: DriverHarness) -> None:
        run = harness.task(self._config(self.exits_with, 0), resources=_ports("http", "admin-ui"))
        run.prestart()
        assert sorted(port.label for port in run.ctx.ports) == ["admin-ui", "http"]
        for port in run.ctx.ports:
            assert PORT_RANGE[0] <= port.value <= PORT_RANGE[1]
            label = clean_env_var(port.label)
            for prefix in ("NOMAD_", "HERDER_"):
                expected = {f"{prefix}IP_{label}": port.host_ip, f"{prefix}HOST_PORT_{label}": str(port.value),
                            f"{prefix}ADDR_{label}": host_address(port.host_ip, port.value)}
                assert {name: run.ctx.env.get(name) for name in expected} == expected
                task_port = run.ctx.env.get(f"{prefix}PORT_{label}", "")
                assert task_port.isdigit() and 0 < int(task_port) < 65536, f"{prefix}PORT_{label} is {task_port!r}"

    def test_task_listens_on_its_host_port(self, harness: DriverHarness) -> None:
        run = self._start(harness, self._config(self.listens_on_port, "http", required=False),
                          resources=_ports("http"), kill_timeout=f"{FORCE_KILL_TIMEOUT}s")  # servers may ignore it
        [port] = run.ctx.ports

        def connects() -> bool:
            try:
                socket.create_connection((port.host_ip, port.value), timeout=1).close()
            except OSError:
                return False
            return True

        assert _poll(connects, READY_TIMEOUT), \
            f"nothing accepts connections on {port.host_ip}:{port.value}{_diagnosis(run)}"
        self._kill(run, {})

    # -- helpers ------------------------------------------------------------------------------------------

    def _driver(self) -> str:
        if not self.driver:
            pytest.fail(f"{type(self).__name__} names no driver: set its `driver`", pytrace=False)
        return self.driver

    def _config(self, scenario: Callable[..., TaskConfig | None], *args: Any, required: bool = True) -> TaskConfig:
        """The config ``scenario(*args)`` gives; one that gives none fails the test, or skips it if optional."""
        config = scenario(*args)
        if config is None:
            name = f"{type(self).__name__}.{scenario.__name__}()"
            if required:
                pytest.fail(f"{name} gives no task: implement shell() or {scenario.__name__}()", pytrace=False)
            pytest.skip(f"{name} gives no task")
        return config

    @staticmethod
    def _start(harness: DriverHarness, config: TaskConfig, **fields: Any) -> TaskRun:
        """Place, prestart, give the task ``$READY_FILE`` and ``$SIGNAL_FILE``, start."""
        run = harness.task(config, **fields)
        run.prestart()
        run.ctx.env[READY_FILE] = run.task_path("ready")
        run.ctx.env[SIGNAL_FILE] = run.task_path("signal")
        run.start()
        return run

    @staticmethod
    def _ready(run: TaskRun, count: int) -> tuple[int, ...]:
        """Wait for the task to write at least ``count`` pids into ``$READY_FILE``; the pids."""
        path = run.local_file("ready")
        deadline = time.monotonic() + READY_TIMEOUT
        previous: tuple[int, ...] | None = None
        while (pids := _read_pids(path)) != previous or len(pids) < count:  # the same twice: written
            if time.monotonic() >= deadline:
                pytest.fail(f"the task did not write {count} pid(s) into $READY_FILE within {READY_TIMEOUT:g}s "
                            f"(it holds {pids}){_diagnosis(run)}", pytrace=False)
            previous = pids
            time.sleep(0.05)
        return pids

    def _host_processes(self, run: TaskRun, pids: tuple[int, ...]) -> dict[int, int]:
        """The task's processes on the host (``pid -> start time``), checked to be running."""
        assert run.handle is not None
        host = set(self.host_pids(run.handle, pids))
        running = processes.identify(host)
        assert running.keys() == host, \
            f"host_pids() gave {sorted(host - running.keys())}, which do not run (the task wrote {pids})"
        return running

    @staticmethod
    def _poll_exit(run: TaskRun, timeout: float) -> ExitResult | None:
        return bounded(lambda: run.wait(timeout), timeout + KILL_GRACE, f"wait({timeout:g})")

    def _wait_exit(self, run: TaskRun) -> ExitResult:
        result = self._poll_exit(run, EXIT_TIMEOUT)
        if result is None:
            pytest.fail(f"the task did not exit within {EXIT_TIMEOUT:g}s{_diagnosis(run)}", pytrace=False)
        assert isinstance(result, ExitResult), f"wait() gave {result!r}, not an ExitResult"
        return result

    def _kill(self, run: TaskRun, recorded: Mapping[int, int]) -> float:
        """Kill the task; check it exits and nothing of it is left. How long ``kill`` took."""
        started = time.monotonic()
        bounded(run.kill, run.task.kill_timeout + KILL_GRACE, f"kill (kill_timeout {run.task.kill_timeout:g}s)")
        elapsed = time.monotonic() - started
        self._wait_exit(run)
        left = processes.wait_gone({**recorded, **processes.marked(run.marker)}, SETTLE)
        if left:
            description = processes.describe(left)
            processes.kill(left)
            pytest.fail(f"processes of the task outlived its kill: {description}", pytrace=False)
        return elapsed

    def _stats_task(self, harness: DriverHarness, count: int, scenario: Callable[..., TaskConfig | None],
                    *args: Any) -> tuple[TaskRun, dict[int, int]]:
        """A running task of the (optional) ``scenario`` that wrote ``count`` pids, and its processes on the host."""
        if not self.supports_stats:
            pytest.skip(f"driver {self.driver} does not measure its tasks")
        run = self._start(harness, self._config(scenario, *args, required=False), kill_timeout=f"{KILL_TIMEOUT}s")
        return run, self._host_processes(run, self._ready(run, count))

    @staticmethod
    def _stats(run: TaskRun) -> TaskStats | None:
        """The handle's ``stats()``, checked to answer in time with :class:`TaskStats`, a dict or None."""
        assert run.handle is not None
        stats = bounded(run.handle.stats, CALL_LIMIT, "stats()")
        assert stats is None or isinstance(stats, TaskStats | dict), \
            f"stats() gave {stats!r}, not a TaskStats (or None when the driver cannot tell)"
        return TaskStats.of(stats)

    def _exec_task(self, harness: DriverHarness) -> TaskRun:
        if not self.supports_exec:
            pytest.skip(f"driver {self.driver} does not support exec")
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        self._ready(run, 2)
        return run

    def _watch_stats(self, run: TaskRun, recorded: Mapping[int, int], sample: Callable[[], TaskStats | None],
                     shown: Callable[[TaskStats], bool], failure: str) -> None:
        """Sample the task until ``shown`` holds of a sample (at most READY_TIMEOUT), then kill it."""
        seen: list[TaskStats | None] = []

        def check() -> bool:
            seen.append(sample())
            return seen[-1] is not None and shown(seen[-1])

        try:
            assert _poll(check, READY_TIMEOUT, STATS_INTERVAL), \
                f"{failure} within {READY_TIMEOUT:g}s; the last samples: {seen[-3:]}"
        finally:
            self._kill(run, recorded)

    def _exec_session_task(self, harness: DriverHarness) -> TaskRun:
        if not self.supports_exec_session:
            pytest.skip(f"driver {self.driver} does not support interactive exec")
        run = self._start(harness, self._config(self.runs_until_killed), kill_timeout=f"{KILL_TIMEOUT}s")
        self._ready(run, 2)
        return run

    @staticmethod
    def _exec(run: TaskRun, script: str) -> ExecResult:
        command = ["/bin/sh", "-c", script]
        result = bounded(lambda: run.exec(command, EXEC_TIMEOUT), EXEC_TIMEOUT + EXEC_GRACE, f"exec of {command}")
        assert isinstance(result, ExecResult), f"exec gave {result!r}, not an ExecResult"
        return result

    def _fingerprint(self, hooks: Hooks) -> Fingerprint | None:
        """The driver's own fingerprint hook, called directly (the facade would turn an exception
        into an unhealthy fingerprint), checked to return in time and never raise."""
        try:
            fingerprint = call_own_hook(hooks, self.driver, "herder_driver_fingerprint", FINGERPRINT_DEADLINE)
        except DidNotReturn:
            raise
        except Exception as exc:
            pytest.fail(f"herder_driver_fingerprint raised {type(exc).__name__}: {exc}; it must report "
                        "detected=False or healthy=False, with a description, instead", pytrace=False)
        if fingerprint is None:  # no fingerprint hook: herder takes the driver as healthy
            return None
        assert isinstance(fingerprint, Fingerprint), f"the fingerprint is {fingerprint!r}, not a Fingerprint"
        assert isinstance(fingerprint.description, str)
        assert fingerprint.description or (fingerprint.detected and fingerprint.healthy), \
            f"an unavailable driver must say why in its description: {fingerprint}"
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in fingerprint.attributes.items()), \
            f"fingerprint attributes must be dict[str, str]: {fingerprint.attributes}"
        return fingerprint


def _ports(*labels: str) -> dict[str, Any]:
    """The ``resources`` of a task with dynamic ports ``labels``."""
    return {"network": {"ports": [{"label": label} for label in labels]}}


class _Session:
    """An exec session under test: a thread reads its output as it comes; closed on leaving."""

    def __init__(self, session: ExecSession) -> None:
        self.session = session
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._ended = False
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, name="exec-session-reader", daemon=True)
        self._reader.start()

    def __enter__(self) -> _Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _read(self) -> None:
        try:
            while (chunk := self.session.read()) is not None:
                stream, data = chunk
                with self._changed:
                    (self.stdout if stream == "stdout" else self.stderr).extend(data)
                    self._changed.notify_all()
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def send(self, data: bytes) -> None:
        self.session.write(data)

    def close_stdin(self) -> None:
        self.session.close_stdin()

    def resize(self, width: int, height: int) -> None:
        self.session.resize(width, height)

    def shows(self, pattern: bytes, timeout: float) -> bool:
        """Whether the session's stdout matches ``pattern`` within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: re.search(pattern, self.stdout) is not None or self._ended,
                                          timeout) and re.search(pattern, self.stdout) is not None

    def expect(self, pattern: bytes, what: str) -> None:
        if not self.shows(pattern, OUTPUT_TIMEOUT):
            pytest.fail(f"{what} ({pattern!r}) did not show within {OUTPUT_TIMEOUT:g}s; the session printed "
                        f"{bytes(self.stdout)!r} (stderr {bytes(self.stderr)!r})", pytrace=False)

    def exit_code(self) -> int | None:
        code = self.session.wait(EXIT_TIMEOUT)
        assert code is not None, f"the command did not exit within {EXIT_TIMEOUT:g}s; it printed {bytes(self.stdout)!r}"
        return code

    def wait_ended(self) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: self._ended, OUTPUT_TIMEOUT), \
                f"the session's output did not end within {OUTPUT_TIMEOUT:g}s after its command exited"

    def close(self) -> None:
        self.session.close()
        self._reader.join(OUTPUT_TIMEOUT)


def _poll(predicate: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Whether ``predicate()`` became true within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
    return True


def _read_pids(path: Path) -> tuple[int, ...]:
    try:
        words = path.read_text().split()
    except OSError:
        return ()
    return tuple(int(word) for word in words) if all(word.isdigit() for word in words) else ()


def _through_json(state: Any) -> dict[str, Any]:
    """``state`` after a trip through JSON, as herder stores it; checked to come back the same."""
    assert isinstance(state, dict), f"handle.state() gave {state!r}, not a dict"
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as exc:
        pytest.fail(f"handle.state() is not JSON-serialisable ({exc}): {state!r}", pytrace=False)
    stored: dict[str, Any] = json.loads(text)
    assert stored == state, f"handle.state() changes through JSON (tuples? keys that are not str?): {state!r}"
    return stored
