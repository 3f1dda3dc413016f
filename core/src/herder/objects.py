"""The value objects passed between the core and plugins; their fields are part of the plugin contract."""

from __future__ import annotations

import signal as _signal
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, Self, runtime_checkable

from herder.model import NetworkDNS, Task


@dataclass(frozen=True)
class ExitResult:
    """How a task's process ended."""

    exit_code: int
    signal: int = 0
    oom_killed: bool = False
    error: str | None = None

    @property
    def successful(self) -> bool:
        return self.exit_code == 0 and self.signal == 0 and self.error is None


@dataclass(frozen=True)
class ExecResult:
    """The result of running a command inside a task.

    ``output`` is stdout and stderr together, capped at :data:`EXEC_OUTPUT_LIMIT`.
    """

    exit_code: int
    output: bytes = b""


EXEC_OUTPUT_LIMIT = 64 * 1024


ExecStream = Literal["stdout", "stderr"]
"""Which of a command's outputs a chunk came from (with a terminal, all of it is ``stdout``)."""


class ExecSession(Protocol):
    """A command running inside a task interactively, as ``herder_task_exec_session`` returns it:
    what ``herder alloc exec -i -t`` and the exec WebSocket drive.

    One thread reads (:meth:`read`) while others write, resize or close; every method may be
    called from any thread. herder always calls :meth:`close` when the session ends, after the
    command exited or to end it.
    """

    def read(self) -> tuple[ExecStream, bytes] | None:
        """Block until the command prints, and return which output and what; None once its
        output has ended (it exited and everything it printed was read) or the session was closed."""

    def write(self, data: bytes) -> None:
        """Send ``data`` to the command's stdin (ignored once stdin is closed or the command gone)."""

    def close_stdin(self) -> None:
        """End the command's stdin (end of file; with a terminal, the terminal's EOF character)."""

    def resize(self, width: int, height: int) -> None:
        """Set the terminal's size in columns and rows (nothing without a terminal)."""

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the command exits and return its exit code (128 + N for signal N);
        None if ``timeout`` ran out."""

    def close(self) -> None:
        """End the command if it still runs (killed) and release what the session holds;
        a :meth:`read` blocked meanwhile returns None. Idempotent."""


@dataclass(frozen=True)
class Fingerprint:
    """What a driver found out about this host."""

    detected: bool
    healthy: bool
    description: str = ""
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DriverNetwork:
    """The network a driver gave a task (a container's IP and port map)."""

    ip: str
    port_map: dict[str, int] = field(default_factory=dict)
    auto_advertise: bool = False


@dataclass(frozen=True)
class TaskStats:
    """A running task's resource usage, as its handle's ``stats()`` returns it; None: not known.

    Counters are cumulative since the task started (CPU time, throttling);
    the client derives ``cpu_percent`` from two of them, so a driver leaves
    it None unless it measures a percent itself.

    - ``memory_rss_bytes``: resident memory of the task's processes (a
      cgroup's ``rss``/``anon`` where the driver has one).
    - ``memory_usage_bytes``, ``memory_limit_bytes``: the cgroup's memory
      usage (page cache included) and its limit, where the driver has a cgroup.
    - ``cpu_total_ns``: CPU time used, user and system, in nanoseconds.
    - ``cpu_percent``: CPU over the last interval, 100 per busy core.
    - ``cpu_throttled_periods``, ``cpu_throttled_ns``: CFS periods in which the
      cgroup was throttled, and the time it was, where a cgroup says.
    - ``pids``: how many processes the task has.
    """

    memory_rss_bytes: int | None = None
    memory_usage_bytes: int | None = None
    memory_limit_bytes: int | None = None
    cpu_total_ns: int | None = None
    cpu_percent: float | None = None
    cpu_throttled_periods: int | None = None
    cpu_throttled_ns: int | None = None
    pids: int | None = None

    @classmethod
    def of(cls, value: TaskStats | dict[str, Any] | None) -> Self | None:
        """What a handle's ``stats()`` returned, as :class:`TaskStats`.

        A mapping (the ad-hoc dict of a handle written before this class)
        contributes the keys named as these fields with numeric values, and
        nothing else; None and anything else mean "not known".
        """
        if isinstance(value, cls):
            return value
        if not isinstance(value, dict):
            return None
        known: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            number = value.get(name)
            if isinstance(number, int | float) and not isinstance(number, bool):
                known[name] = float(number) if name == "cpu_percent" else int(number)
        return cls(**known)

    def merged(self, other: TaskStats) -> TaskStats:
        """These figures, with ``other``'s where these are None."""
        return replace(self, **{name: getattr(other, name) for name in self.__dataclass_fields__
                                if getattr(self, name) is None})


@dataclass(frozen=True)
class TaskEvent:
    """One entry of a task's event history, with Nomad's event type names."""

    type: str
    message: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    time: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class NetworkIsolation:
    """A network namespace a driver made for an allocation (``herder_alloc_network_create``).

    ``path`` is a file that ``setns(2)`` accepts (``/proc/PID/ns/net`` of a pause container,
    or a bind mount under ``/var/run/netns``); ``labels`` are the JSON-serialisable facts the
    driver needs to join and destroy it again (docker: its pause container's id), kept in the
    state database so that a restarted herder can."""

    path: Path
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class AllocNetwork:
    """The network namespace an allocation's tasks share (group ``network { mode = "bridge" }``
    or ``"cni/NAME"``): every driver starts its task's processes inside ``path``. ``ip`` is the
    allocation's address on the bridge; ``hostname`` and ``dns`` are the namespace's, as the
    job file asks them ("" and None: the defaults)."""

    mode: str
    path: Path
    ip: str = ""
    hostname: str = ""
    dns: NetworkDNS | None = None
    labels: dict[str, str] = field(default_factory=dict)
    """The labels of the :class:`NetworkIsolation` a driver made, else empty."""


@dataclass(frozen=True)
class DriverCapabilities:
    """What a driver can do beyond starting a task (``herder_driver_capabilities``): jobs that
    need more are refused at validation, naming the driver.

    ``network_isolation`` holds ``"host"`` (the task runs in the host's network) and
    ``"group"`` (it joins the allocation's namespace, :attr:`herder.TaskContext.network`);
    ``volume_mounts`` says that the driver mounts ``ctx.mounts`` (host volumes) into its task."""

    network_isolation: frozenset[str] = frozenset({"host"})
    volume_mounts: bool = False


@dataclass
class Alloc:
    """An allocation: one instance of a task group."""

    id: str
    name: str
    index: int
    job_name: str
    group_name: str
    dir: Path
    tasks: list[Task]
    network: AllocNetwork | None = None
    """The allocation's namespace once made; None for host networking."""


@runtime_checkable
class TaskHandle(Protocol):
    """A running task, as a driver's ``herder_task_start`` returns it.

    A handle may also carry ``started_details``, a mapping of JSON values
    that the task's ``Started`` event adds to its details (how the task runs:
    the java driver says whether its JVM is isolated). It is optional, and
    not part of the protocol's structural check.

    A handle may also have ``on_exit(callback: Callable[[], None]) -> bool``
    (optional, not part of the structural check either): it calls
    ``callback()`` once, from any thread, as soon as ``wait(0)`` no longer
    returns None (the task exited, or the handle lost it), at once if so
    already, and returns True. The callback is quick and must not be called
    under a lock that ``wait`` takes. herder then calls ``wait(0)``, and calls
    ``on_exit`` again if that still says None. So a running task holds no
    thread of herder's; a handle without it (or whose ``on_exit`` returns
    False) is waited for by a thread of its own in ``wait()``.
    :class:`herder.sdk.SupervisedProcess` has it.
    """

    id: str
    network: DriverNetwork | None

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        """Block until the task exits and return how; None if ``timeout`` ran out."""

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the task."""

    def kill(self, timeout: float, sig: int | None) -> None:
        """Stop the task: send ``sig`` (None: the driver's default stop signal),
        wait up to ``timeout`` seconds for it to exit, then force it."""

    def stats(self) -> TaskStats | dict[str, Any] | None:
        """Resource usage (:class:`TaskStats`), or None when the driver cannot tell.

        Called by the client only while someone asks for the task's usage,
        from a thread other than the task's: it reads counters, it does not
        wait. A plain dict (older handles) is read as :meth:`TaskStats.of` says.
        """

    def state(self) -> dict[str, Any]:
        """A JSON-serialisable dict from which ``herder_task_recover`` can reattach."""


def parse_signal(name: str) -> int:
    """``"SIGINT"``, ``"INT"`` or ``"2"`` -> the signal number."""
    text = name.strip().upper()
    if text.isdigit():
        return int(text)
    if not text.startswith("SIG"):
        text = "SIG" + text
    try:
        return int(_signal.Signals[text])
    except KeyError:
        raise ValueError(f"unknown signal {name!r}") from None
