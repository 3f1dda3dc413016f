"""``herder alloc exec`` with stdin or a terminal: the agent's exec WebSocket, driven from here.

The frames are Nomad's (docs/agent.md). Output is written as it comes; stdin is
read and sent as it comes (end of file closes the command's stdin); with a
terminal, the local one is in raw mode for the session (every key goes to the
command, ^C included) and restored however the session ends, and each window
size change (``SIGWINCH``) is sent. Imported only by that command: the
WebSocket client is loaded when it runs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import signal
import sys
import termios
import threading
import tty as termmode
from collections.abc import Iterator
from types import FrameType
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from herder.cli.client import CONNECT_TIMEOUT, AgentClient
from herder.cli.common import fail

INPUT_CHUNK = 16 << 10
"""The most stdin bytes in one frame."""
MAX_FRAME = 1 << 20


def run(agent: AgentClient, alloc_id: str, task: str, command: list[str], *, stdin: bool, tty: bool) -> int:
    """Run ``command`` in ``task`` through the WebSocket; its exit code."""
    url = agent.websocket_url(f"/v1/allocations/{alloc_id}/exec",
                              {"task": task, "command": json.dumps(command), "tty": str(tty).lower()})
    try:
        # proxy=None: as every other command, the agent is reached directly, whatever HTTP(S)_PROXY says.
        connection = connect(url, additional_headers=agent.headers, ssl=agent.tls if agent.https else None,
                             open_timeout=CONNECT_TIMEOUT, max_size=MAX_FRAME, proxy=None, compression=None)
    except InvalidStatus as exc:
        agent.refused(exc.response.status_code, bytes(exc.response.body or b""))
    except (OSError, InvalidHandshake) as exc:  # TimeoutError and the ssl errors are OSErrors
        agent.unreachable(exc)
    with connection, _terminal(tty) as resized:
        feeder = threading.Thread(target=_feed, args=(connection, stdin, tty, resized), name="exec-stdin",
                                  daemon=True)  # it may block reading a stdin that never ends: not waited for
        feeder.start()
        code = _receive(connection)
    if code is None:
        fail(f"the session ended before the command exited: {_why(connection)}")
    return code


def _receive(connection: ClientConnection) -> int | None:
    """Write the command's output as it comes; its exit code, or None if the socket closed first."""
    outputs = {"stdout": sys.stdout.fileno(), "stderr": sys.stderr.fileno()}
    try:
        for message in connection:
            frame: dict[str, Any] = json.loads(message)
            if frame.get("exited"):
                return int(frame.get("result", {}).get("exit_code", -1))
            for stream, fd in outputs.items():
                if data := (frame.get(stream) or {}).get("data"):
                    _write_all(fd, base64.b64decode(data))
    except ConnectionClosed:
        pass
    return None


def _why(connection: ClientConnection) -> str:
    if connection.close_code is None or connection.close_code == 1006:  # 1006: no close frame came
        return "the connection to the agent was lost"
    return connection.close_reason or f"closed with code {connection.close_code}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _feed(connection: ClientConnection, stdin: bool, tty: bool, resized: int | None) -> None:
    """Send stdin as it comes, and the window's size at first and each time it changes."""
    def send(frame: dict[str, Any]) -> None:
        connection.send(json.dumps(frame))

    try:
        if tty:
            send(_size())
        if not stdin:
            send({"stdin": {"close": True}})
        watched = [fd for fd in ((0 if stdin else None), resized) if fd is not None]
        while watched:
            ready, _, _ = select.select(watched, [], [])
            if resized in ready:
                os.read(resized, 512)  # one or many signals: one new size
                send(_size())
            if 0 in ready:
                data = os.read(0, INPUT_CHUNK)
                if data:
                    send({"stdin": {"data": base64.b64encode(data).decode("ascii")}})
                else:
                    send({"stdin": {"close": True}})
                    watched.remove(0)
    except (ConnectionClosed, OSError):
        return  # the session ended: the receiving side says how


def _size() -> dict[str, Any]:
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            columns, lines = os.get_terminal_size(fd)
            return {"tty_size": {"height": lines, "width": columns}}
    return {"tty_size": {"height": 24, "width": 80}}


@contextlib.contextmanager
def _terminal(tty: bool) -> Iterator[int | None]:
    """With ``tty``: the local terminal in raw mode, and a descriptor readable at each window size
    change; restored on leaving, SIGTERM and SIGHUP included. Without: nothing (None)."""
    if not tty:
        yield None
        return
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    saved = termios.tcgetattr(0) if os.isatty(0) else None
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGWINCH, signal.SIGTERM, signal.SIGHUP)}
    previous_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGWINCH, lambda _signum, _frame: None)  # the wakeup fd gets it
    signal.signal(signal.SIGTERM, _exit_on)
    signal.signal(signal.SIGHUP, _exit_on)
    try:
        if saved is not None:
            termmode.setraw(0, termios.TCSANOW)
        yield wake_r
    finally:
        if saved is not None:
            termios.tcsetattr(0, termios.TCSADRAIN, saved)
        signal.set_wakeup_fd(previous_wakeup)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
        os.close(wake_w)
        # wake_r stays open: the feeding thread may still select on it until the process exits.


def _exit_on(signum: int, _frame: FrameType | None) -> None:
    """Leave through the ``finally`` clauses (the terminal restored), as a shell reports the signal."""
    raise SystemExit(128 + signum)
