"""An interactive command in a container through Docker's exec API: an :class:`herder.ExecSession`."""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import docker
import docker.errors
import requests
from docker.utils.socket import STDERR, frames_iter

from herder import ExecStream
from herder.sdk import kill_session

POLL_INTERVAL = 0.05
"""How often the exec is inspected while waiting for it to start or exit (the API cannot wait for an exec)."""
START_TIMEOUT = 30.0
"""How long the daemon may take to start the command once the exec's connection is up."""


class DockerExecSession:
    """``command`` run by ``exec_create`` / ``exec_start`` in the container, on the exec's hijacked connection.

    Use :meth:`start`. With a terminal the connection carries the terminal's
    bytes both ways; without one, the command's output comes multiplexed
    (stdout and stderr frames, each with an 8-byte header), which
    :func:`docker.utils.socket.frames_iter` takes apart, and ending stdin
    half-closes the connection, as the docker CLI does. The daemon cannot kill
    an exec: :meth:`close` kills the command's session by its host pid (the
    runtime starts an exec's command as a session leader), which ends the
    exec, its connection with it.
    """

    def __init__(self, api: docker.APIClient, exec_id: str, connection: Any, tty: bool) -> None:
        self._api = api
        self._id = exec_id
        self._connection = connection  # socket.SocketIO (a socket for TLS), as the SDK gives it
        # The socket under it: writes and shutdowns go there (SocketIO has neither sendall nor shutdown).
        self._socket: socket.socket = getattr(connection, "_sock", connection)
        self._socket.settimeout(None)  # the client's timeout would end a read of a quiet shell
        self._frames: Iterator[tuple[int, bytes]] = frames_iter(connection, tty)
        self._tty = tty
        self._reading = threading.Lock()
        self._writing = threading.Lock()
        self._closing = threading.Lock()
        self._closed = False
        self._pid = 0

    @classmethod
    def start(cls, api: docker.APIClient, container: str, command: list[str], tty: bool) -> DockerExecSession:
        """Create and start the exec (as the container's user, with its environment and working directory)
        and return once its command runs.

        :raises docker.errors.APIError: as the daemon answers (no such container, not running ...).
        :raises requests.RequestException: the daemon is out of reach.
        :raises TimeoutError: the daemon did not start the command within :data:`START_TIMEOUT`.
        """
        exec_id = api.exec_create(container, command, stdin=True, stdout=True, stderr=True, tty=tty)["Id"]
        session = cls(api, exec_id, api.exec_start(exec_id, tty=tty, socket=True), tty)
        deadline = time.monotonic() + START_TIMEOUT
        while not (state := session._inspect())["Pid"] and state.get("ExitCode") is None:
            if time.monotonic() >= deadline:
                session.close()
                raise TimeoutError(f"the daemon did not start the exec within {START_TIMEOUT:g}s")
            time.sleep(POLL_INTERVAL)
        session._pid = int(state["Pid"] or 0)
        return session

    def _inspect(self) -> dict[str, Any]:
        state: dict[str, Any] = self._api.exec_inspect(self._id)
        return state

    def read(self) -> tuple[ExecStream, bytes] | None:
        with self._reading:
            if self._closed:
                return None
            try:
                stream, data = next(self._frames)
            except (StopIteration, OSError):
                return None  # the exec ended (or close() shut the connection)
            return ("stderr" if stream == STDERR else "stdout"), data

    def write(self, data: bytes) -> None:
        with self._writing:
            if self._closed:
                return
            with contextlib.suppress(OSError):  # the command is gone: as the protocol says, ignored
                self._socket.sendall(data)

    def close_stdin(self) -> None:
        with self._writing:
            if self._closed:
                return
            with contextlib.suppress(OSError):
                if self._tty:
                    # A terminal has no end of its own: the line discipline's EOF character ends a read.
                    self._socket.sendall(b"\x04")
                else:
                    self._socket.shutdown(socket.SHUT_WR)

    def resize(self, width: int, height: int) -> None:
        if not self._tty or self._closed:
            return
        with contextlib.suppress(docker.errors.APIError, requests.RequestException):  # it ended meanwhile
            self._api.exec_resize(self._id, height=height, width=width)

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (state := self._inspect())["Running"]:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            time.sleep(POLL_INTERVAL if remaining is None else min(POLL_INTERVAL, remaining))
        exit_code = state.get("ExitCode")
        return int(exit_code) if exit_code is not None else None

    def close(self) -> None:
        with self._closing:
            if self._closed:
                return
            self._closed = True
        if self._pid:
            try:
                ended = not self._inspect()["Running"]  # then the runtime has reaped the command
            except (docker.errors.APIError, requests.RequestException):
                ended = False
            kill_session(self._pid, signal.SIGKILL, leader_gone=ended)
        # Wakes a read() blocked on the connection (it then sees its end) and a write() waiting for room.
        with contextlib.suppress(OSError):
            self._socket.shutdown(socket.SHUT_RDWR)
        with self._reading, self._writing:
            self._connection.close()
