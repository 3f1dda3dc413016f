"""Just enough of QEMU's machine protocol (QMP) to ask a guest to power off.

The QMP socket is a unix socket in the task directory, which QEMU creates
by a path relative to its working directory: a task directory's absolute
path can exceed the 107 bytes a unix socket address holds. herder reaches it
the same way, through a short ``/proc/self/fd/N/`` path of the directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SOCKET = "qmp.sock"
"""The QMP socket's name in the task directory."""


class QmpError(Exception):
    """QEMU's monitor could not be reached, or refused a command."""


@contextlib.contextmanager
def _short_path(path: Path) -> Iterator[str]:
    """A path of ``path`` short enough for a unix socket address, valid inside the block."""
    directory = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{directory}/{path.name}"
    finally:
        os.close(directory)


class Qmp:
    """One QMP session: the greeting read and the capabilities negotiated on :meth:`connect`."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb")

    @classmethod
    def connect(cls, path: Path, timeout: float) -> Qmp:
        """:raises QmpError: nothing answers at ``path`` within ``timeout`` seconds."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            with _short_path(path) as short:
                sock.connect(short)
            session = cls(sock)
            if "QMP" not in session._read():
                raise QmpError(f"{path} is not a QMP socket")
            session.execute("qmp_capabilities")
        except OSError as exc:
            sock.close()
            raise QmpError(f"cannot reach QEMU's monitor at {path}: {exc}") from exc
        except QmpError:
            sock.close()
            raise
        return session

    def execute(self, command: str, **arguments: Any) -> Any:
        """Run ``command``; its ``return`` value. Events that come first are passed over.

        :raises QmpError: QEMU answered with an error, or went away.
        """
        message: dict[str, Any] = {"execute": command}
        if arguments:
            message["arguments"] = arguments
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\n")
            while True:
                answer = self._read()
                if "return" in answer:
                    return answer["return"]
                if "error" in answer:
                    error = answer["error"]
                    raise QmpError(f"{command}: {error.get('desc', error) if isinstance(error, dict) else error}")
        except OSError as exc:
            raise QmpError(f"{command}: {exc}") from exc

    def _read(self) -> dict[str, Any]:
        line = self._reader.readline()
        if not line:
            raise QmpError("QEMU closed its monitor")
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise QmpError(f"not a QMP message: {line[:200]!r}") from exc
        if not isinstance(message, dict):
            raise QmpError(f"not a QMP message: {line[:200]!r}")
        return message

    def close(self) -> None:
        self._reader.close()
        self._sock.close()

    def __enter__(self) -> Qmp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def powerdown(path: Path, timeout: float) -> None:
    """Press the guest's power button (``system_powerdown``); the guest decides what to do with it.

    :raises QmpError: the monitor could not be reached or refused.
    """
    with Qmp.connect(path, timeout) as qmp:
        qmp.execute("system_powerdown")
