"""Interactive exec over a WebSocket: ``GET /v1/allocations/{id}/exec``, with Nomad's frames.

``?task=T&command=<JSON array>&tty=true|false`` starts the command in the
running task (:meth:`herder.app.Agent.exec_session`) before the upgrade, so
that a bad request, an unknown allocation or a task that is not running is
an ordinary HTTP error (400, 404, 409: the API's error), as a refused token is
(:mod:`herder.agent.auth`, checked before this route). Then, as Nomad's
``/v1/client/allocation/{id}/exec``, so that its clients work unchanged:

- client to server: ``{"stdin": {"data": "<base64>"}}``, ``{"stdin": {"close": true}}``,
  ``{"tty_size": {"height": H, "width": W}}``; anything else (``{}``, Nomad's
  heartbeat) is ignored;
- server to client: ``{"stdout": {"data": "<base64>"}}``, ``{"stderr": {"data": "<base64>"}}``,
  then ``{"exited": true, "result": {"exit_code": N}}`` and a normal close (1000).

A frame the server cannot read closes the socket with 1008 and the reason.
Whatever ends the socket (the command exiting, the client leaving, an error)
closes the session: its command is killed if it still runs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import functools
import json
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field, ValidationError
from starlette.datastructures import QueryParams
from starlette.websockets import WebSocket, WebSocketState

from herder.agent import models
from herder.agent.auth import offered_protocols, websocket_refusal
from herder.app import Agent, Conflict, NotFound
from herder.objects import ExecSession

log = logging.getLogger("herder.agent")

PATH = "/v1/allocations/{alloc_id}/exec"
PROTOCOL = "herder.exec"
"""The subprotocol the server answers with when the client offers it (a browser offers it beside its token)."""
OUTPUT_CHUNK = 16 << 10
"""The most output bytes in one frame (before base64)."""
MAX_FRAME = 1 << 20
"""The largest frame a client may send (uvicorn's ``ws_max_size``; a paste of up to 768 KiB)."""
MAX_PENDING = 4 << 20
"""Input bytes received but not yet taken by the command: beyond it, the socket is closed, as the
command does not read what it is sent; the server goes on reading frames meanwhile, so it always
sees the client leave."""

# Go's strconv.ParseBool, as Nomad reads ?tty=
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})

CLOSE_NORMAL, CLOSE_POLICY, CLOSE_TOO_BIG, CLOSE_ERROR = 1000, 1008, 1009, 1011


class Stdin(BaseModel):
    data: str = ""
    close: bool = False


class TtySize(BaseModel):
    """A terminal's size; Nomad's client leaves out a dimension that is 0 (a terminal of no size, when
    its output is not a terminal), and 0 is no resize."""

    height: int = Field(default=0, ge=0, le=0xFFFF)
    width: int = Field(default=0, ge=0, le=0xFFFF)


class ExecInput(BaseModel):
    """A frame from the client (other keys are ignored, as Nomad does)."""

    stdin: Stdin | None = None
    tty_size: TtySize | None = None


class BadFrame(Exception):
    """A frame the server cannot use: the socket is closed with ``code`` and the message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_query(query: QueryParams) -> tuple[str, list[str], bool]:
    """The task, the command and whether it wants a terminal.

    :raises ValueError: naming the parameter that is missing or malformed.
    """
    task = query.get("task", "")
    if not task:
        raise ValueError("task: missing (the task to run the command in)")
    try:
        command = json.loads(query.get("command", ""))
    except ValueError:
        command = None
    if not isinstance(command, list) or not command or not all(isinstance(arg, str) for arg in command):
        raise ValueError('command: expected a JSON array of strings, such as ["/bin/sh","-c","ls"]')
    tty = query.get("tty", "false")
    if tty not in _TRUE | _FALSE:
        raise ValueError(f"tty: expected true or false, not {tty!r}")
    return task, command, tty in _TRUE


def json_error(status: int, message: str) -> Response:
    """A refused handshake's answer on herder's API: its JSON error."""
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(models.Error(error=message, errors=[]).model_dump(), status_code=status, headers=headers)


def register(api: FastAPI, agent: Agent, path: str = PATH,
             authorized: Callable[[Mapping[bytes, bytes]], bool] | None = None,
             error: Callable[[int, str], Response] = json_error) -> None:
    """Serve the exec WebSocket on ``api`` at ``path`` (an ``{alloc_id}`` in it); ``authorized`` tells
    whether a handshake's headers carry the token, when not only as ``Authorization: Bearer``;
    ``error`` answers a refused handshake (the API's errors: herder's JSON, Nomad's plain text)."""

    async def _deny(websocket: WebSocket, status: int, message: str) -> None:
        await websocket.send_denial_response(error(status, message))

    async def exec_socket(websocket: WebSocket) -> None:
        # Guard refused already; checked again in case the application is served without it.
        refusal = websocket_refusal(websocket.scope, agent.config.token, authorized=authorized)
        if refusal is not None:
            await _deny(websocket, *refusal)
            return
        try:
            task, command, tty = parse_query(websocket.query_params)
            alloc = agent.alloc(websocket.path_params["alloc_id"])
            session = await asyncio.to_thread(agent.exec_session, alloc, task, command, tty)
        except ValueError as exc:
            await _deny(websocket, 400, f"invalid query: {exc}")
            return
        except NotFound as exc:
            await _deny(websocket, 404, str(exc))
            return
        except Conflict as exc:
            await _deny(websocket, 409, str(exc))
            return
        try:
            offered = PROTOCOL in offered_protocols(dict(websocket.scope["headers"]))
            await websocket.accept(subprotocol=PROTOCOL if offered else None)
            await _Bridge(websocket, session).run()
        finally:
            await asyncio.to_thread(session.close)

    api.router.add_websocket_route(path, exec_socket)


class _Bridge:
    """One accepted socket and its session: the session's output to the socket from a thread of
    its own (its read() blocks), the socket's frames to the session through another."""

    def __init__(self, websocket: WebSocket, session: ExecSession) -> None:
        self.websocket = websocket
        self.session = session
        self.loop = asyncio.get_running_loop()
        self.ended = threading.Event()
        """Set once the client left or input failed: the output thread then stops without a word."""
        self.pending = 0
        """Input bytes received, not yet taken by the command."""

    async def run(self) -> None:
        inputs: asyncio.Queue[Callable[[], None]] = asyncio.Queue()
        # One thread takes the input, in order: a write may block while the command reads nothing.
        taker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="exec-input")
        output = threading.Thread(target=self._pump_output, name="exec-output", daemon=True)
        output.start()
        applying = asyncio.create_task(self._apply(inputs, taker))
        try:
            await self._receive(inputs)
        except BadFrame as exc:
            await self._close(exc.code, str(exc))
        finally:
            self.ended.set()
            applying.cancel()
            # close() kills the command if it runs, and wakes the blocked read() and write().
            await asyncio.to_thread(self._stop, output, taker)

    def _stop(self, output: threading.Thread, taker: ThreadPoolExecutor) -> None:
        self.session.close()
        taker.shutdown(wait=True)
        output.join()

    async def _receive(self, inputs: asyncio.Queue[Callable[[], None]]) -> None:
        """Read frames until the client leaves; :class:`BadFrame` for one it must not send."""
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            raw = message.get("text") or message.get("bytes") or b""
            if len(raw) > MAX_FRAME:
                raise BadFrame(CLOSE_TOO_BIG, f"a frame over {MAX_FRAME} bytes")
            try:
                frame = ExecInput.model_validate_json(raw)
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = ".".join(str(part) for part in problem["loc"])
                raise BadFrame(CLOSE_POLICY,
                               f"invalid frame: {where + ': ' if where else ''}{problem['msg']}") from None
            if frame.stdin is not None and frame.stdin.data:
                try:
                    data = base64.b64decode(frame.stdin.data, validate=True)
                except (binascii.Error, ValueError):
                    raise BadFrame(CLOSE_POLICY, "invalid frame: stdin.data: not base64") from None
                self.pending += len(data)
                if self.pending > MAX_PENDING:
                    raise BadFrame(CLOSE_POLICY, f"the command took none of the last {MAX_PENDING} bytes sent")
                inputs.put_nowait(functools.partial(self._write, data))
            if frame.stdin is not None and frame.stdin.close:
                inputs.put_nowait(self.session.close_stdin)
            if (size := frame.tty_size) is not None and size.height and size.width:
                inputs.put_nowait(functools.partial(self.session.resize, size.width, size.height))

    def _write(self, data: bytes) -> None:
        self.session.write(data)
        self.loop.call_soon_threadsafe(self._taken, len(data))

    def _taken(self, count: int) -> None:
        self.pending -= count

    async def _apply(self, inputs: asyncio.Queue[Callable[[], None]], taker: ThreadPoolExecutor) -> None:
        while True:
            action = await inputs.get()
            try:
                await self.loop.run_in_executor(taker, action)
            except Exception:
                log.exception("exec: passing input to the command failed")
                await self._close(CLOSE_ERROR, "passing input to the command failed")
                return

    def _pump_output(self) -> None:
        """The session's output as frames, then its exit code; runs in a thread of its own."""
        try:
            while (chunk := self.session.read()) is not None:
                stream, data = chunk
                for start in range(0, len(data), OUTPUT_CHUNK):
                    piece = base64.b64encode(data[start:start + OUTPUT_CHUNK]).decode("ascii")
                    self._call(self.websocket.send_text(json.dumps({stream: {"data": piece}})))
            if self.ended.is_set():
                return
            code = self.session.wait()
            self._call(self.websocket.send_text(json.dumps({"exited": True, "result": {"exit_code": code}})))
            self._call(self._close(CLOSE_NORMAL, ""))
        except Exception:
            if self.ended.is_set():
                return  # the client left: nothing more to say, to nobody
            log.exception("exec: reading the command's output failed")
            self._call(self._close(CLOSE_ERROR, "reading the command's output failed"))

    def _call(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run ``coroutine`` on the socket's event loop and wait for it (from the output thread)."""
        asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    async def _close(self, code: int, reason: str) -> None:
        if self.websocket.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError, OSError):  # the client is gone already
                await self.websocket.close(code, reason[:120])  # a close reason is at most 123 bytes
