"""The runc command line, as the driver uses it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from herder import DriverError

DEFAULT_ROOT = Path("/run/runc")
"""runc's state directory for root when ``--root`` is not given: one subdirectory per container."""

COMMAND_TIMEOUT = 30.0
"""How long a short runc command (kill, delete, state, ps) may take."""

_GONE = ("does not exist", "not exist", "container not running", "process already finished")
"""What runc says when the container (or its init) is no longer there: nothing left to do."""


class RuncError(DriverError):
    """A runc command failed."""


class Runc:
    """``runc [--root ROOT] ...``; ``binary`` is an absolute path."""

    def __init__(self, binary: str, root: str = "") -> None:
        self.binary = binary
        self.root = root

    def argv(self, *args: str) -> list[str]:
        """The command line of ``runc ARGS`` with the global options."""
        return [self.binary, *(("--root", self.root) if self.root else ()), *args]

    def call(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """Run ``runc ARGS``; its stdout.

        :raises RuncError: it failed (with runc's message) or timed out.
        """
        try:
            done = subprocess.run(self.argv(*args), capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuncError(f"runc {args[0]}: {exc}") from exc
        if done.returncode != 0:
            message = (done.stderr.strip() or done.stdout.strip()).splitlines()
            raise RuncError(f"runc {args[0]}: {message[-1] if message else f'exit code {done.returncode}'}")
        return done.stdout

    def version(self, timeout: float) -> str:
        """The version ``runc --version`` prints first (``1.1.5+ds1``)."""
        first = self.call("--version", timeout=timeout).splitlines()[0]
        return first.removeprefix("runc version").strip()

    def known(self, container: str) -> bool:
        """Whether runc has state for ``container``: its directory in runc's root, as ``runc list`` reads
        it. A look at the directory costs nothing; a runc command costs tens of milliseconds per start."""
        return (Path(self.root) if self.root else DEFAULT_ROOT).joinpath(container).exists()

    def state(self, container: str) -> dict[str, Any] | None:
        """``runc state``: the container's status, pid and bundle; None when there is no such container."""
        try:
            state: dict[str, Any] = json.loads(self.call("state", container))
        except RuncError as exc:
            if _gone(exc):
                return None
            raise
        return state

    def pids(self, container: str) -> list[int]:
        """The host's pids of the container's processes (none when it is gone)."""
        try:
            pids: list[int] = json.loads(self.call("ps", "--format", "json", container)) or []
        except RuncError as exc:
            if _gone(exc):
                return []
            raise
        return pids

    def kill(self, container: str, sig: int) -> bool:
        """Send ``sig`` to the container's init; False when it is not running any more.

        Killing the init with SIGKILL ends its whole PID namespace: the kernel
        kills every other process of the container.
        """
        try:
            self.call("kill", container, str(int(sig)))
        except RuncError as exc:
            if _gone(exc):
                return False
            raise
        return True

    def delete(self, container: str) -> None:
        """``runc delete --force``: kill whatever runs and remove the container; nothing if there is none."""
        try:
            self.call("delete", "--force", container)
        except RuncError as exc:
            if not _gone(exc):
                raise


def _gone(exc: RuncError) -> bool:
    return any(words in str(exc) for words in _GONE)


def exec_argv(runc: Runc, container: str, command: Sequence[str], pid_file: str, *, tty: bool = False) -> list[str]:
    """``runc exec``: ``command`` in the container, with the user, environment and limits of its task;
    on a terminal of its own with ``tty`` (runc then proxies its own stdin's terminal to it)."""
    return runc.argv("exec", *(("--tty",) if tty else ()), "--pid-file", pid_file, container, *command)
