"""What the runner knows about one run of a task: the ``ctx`` of every task hook."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from herder.objects import AllocNetwork, TaskEvent


@dataclass(frozen=True)
class TaskDir:
    """The directories of one task, as paths on the host."""

    dir: Path
    local_dir: Path
    secrets_dir: Path
    tmp_dir: Path
    alloc_dir: Path
    logs_dir: Path


@dataclass(frozen=True)
class AllocatedPort:
    """A port given to an allocation: ``value`` on the host, ``to`` in the task."""

    label: str
    value: int
    to: int | None = None
    host_ip: str = "127.0.0.1"


@dataclass(frozen=True)
class HostMount:
    """A host volume a task mounts (its ``volume_mount``): ``source`` on the host, prepared by
    herder, at ``destination`` in the task; ``propagation`` is Nomad's ``propagation_mode``
    (``private``, ``host-to-task``, ``bidirectional``)."""

    source: Path
    destination: str
    read_only: bool = False
    propagation: str = "private"


class CreatedResources:
    """Resources a task made that cleanup must release (containers, images, ...).

    Persisted with the task state, so cleanup after herder restarted still
    knows them. Thread-safe.
    """

    def __init__(self, items: list[tuple[str, str]] | None = None) -> None:
        self._items: list[tuple[str, str]] = list(items or [])
        self._lock = threading.Lock()

    def add(self, kind: str, value: str) -> None:
        with self._lock:
            if (kind, value) not in self._items:
                self._items.append((kind, value))

    def items(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._items)


EventEmitter = Callable[[TaskEvent], None]


@dataclass
class TaskContext:
    """One run of a task, as the task hooks see it.

    ``env`` is the task's final environment: prestart hooks may add to it, and
    the driver starts the task with it. ``stdout`` and ``stderr`` are the
    task's log sinks: binary file objects whose ``fileno()`` a child process
    can inherit, and whose bytes end up in the rotating log files.
    """

    alloc_id: str
    alloc_name: str
    alloc_index: int
    job_name: str
    group_name: str
    task_name: str
    env: MutableMapping[str, str]
    task_dir: TaskDir
    ports: list[AllocatedPort]
    stdout: BinaryIO
    stderr: BinaryIO
    created: CreatedResources = field(default_factory=CreatedResources)
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("herder.task"))
    emitter: EventEmitter | None = field(default=None, repr=False)
    supervisor: Any = field(default=None, repr=False)
    """The process supervisor of this data dir (:class:`herder.supervisor.Supervisor`):
    what :class:`herder.sdk.SupervisedProcess` starts the task's processes through."""
    output_paths: tuple[Path, Path] | None = None
    """When another program collects the task's output (Nomad's log FIFOs), its stdout
    and stderr files: supervised processes write there instead of the rotating files,
    and ``stdout`` / ``stderr`` are these files."""
    network: AllocNetwork | None = None
    """The allocation's network namespace, which the task's processes must join; None
    for host networking. Only a driver whose capabilities include ``"group"`` sees one."""
    mounts: list[HostMount] = field(default_factory=list)
    """The host volumes to mount in the task; only a driver declaring ``volume_mounts`` sees any."""
    cores: tuple[int, ...] = ()
    """The host CPUs reserved for this task alone (``resources { cores }``); a driver that can pin a task
    to CPUs (a cpuset) pins it to these."""
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    """Set once the task is being stopped for good: a hook that waits or downloads in
    ``herder_task_prestart`` ends what it does at once and raises."""

    def emit_event(self, type: str, message: str = "", **details: Any) -> None:
        """Record a task event (drivers use type ``Driver`` for progress)."""
        if self.emitter is not None:
            self.emitter(TaskEvent(type=type, message=message, details=details))
