"""The host's process table, as the conformance kit looks at it.

A process is named by its pid *and* its start time (see
:func:`herder.supervisor.protocol.process_start_time`), so that a pid the
kernel hands out again is never taken for the process that had it before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from herder.supervisor.protocol import process_alive, process_start_time

MARKER = "HERDER_TESTING_TASK"
"""The variable the harness puts in every task's environment, with a value of the task's own:
whatever process carries it on the host belongs to that task (its exec'd commands included)."""


def identify(pids: Iterable[int]) -> dict[int, int]:
    """``pid -> start time`` of those of ``pids`` that run (not zombies)."""
    found: dict[int, int] = {}
    for pid in pids:
        start = process_start_time(pid)
        if start is not None and process_alive(pid, start):
            found[pid] = start
    return found


def marked(*values: str) -> dict[int, int]:
    """``pid -> start time`` of the running processes whose environment holds ``MARKER=value``
    for one of ``values``.

    Only the processes this user may look at are seen (all of them for root).
    """
    needles = {f"{MARKER}={value}".encode() for value in values}
    found: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        if needles.intersection(environ.split(b"\0")):
            found |= identify([int(entry.name)])
    return found


def command_line(pid: int) -> str:
    """The command line of ``pid``, its arguments joined by spaces ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def still_running(processes: Mapping[int, int]) -> dict[int, int]:
    """Those of ``processes`` (``pid -> start time``) that still run."""
    return {pid: start for pid, start in processes.items() if process_alive(pid, start)}


def wait_gone(processes: Mapping[int, int], timeout: float) -> dict[int, int]:
    """Wait up to ``timeout`` seconds for ``processes`` to end; those still running then."""
    deadline = time.monotonic() + timeout
    while (left := still_running(processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def describe(processes: Mapping[int, int]) -> str:
    """``pid (command line)`` of each process, for a failure message."""
    return ", ".join(f"{pid} ({command_line(pid) or '?'})" for pid in processes)


def kill(processes: Mapping[int, int]) -> None:
    """SIGKILL each of ``processes`` that still runs as the very process it was."""
    for pid, start in processes.items():
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            continue  # gone
        try:
            # Checked once the pidfd is open: it names this very process even if the pid is reused.
            if process_alive(pid, start):
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        finally:
            os.close(pidfd)
