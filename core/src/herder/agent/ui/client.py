"""The UI's way to the agent: its own HTTP API, called in-process with the agent's token.

The UI is a client of the API as the command line is: it shows what the API answers, can do only what
the API allows, and the API's checks and errors are the UI's. Two read-only streams, the event stream
and a followed log, and the WebSocket of an interactive exec (the terminal page's) are passed through to
the browser as the API sends them (:class:`StreamForwarder`).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import httpx
from starlette.requests import HTTPConnection
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from herder.agent.ui.security import Sessions, socket_refusal


class ApiFailure(Exception):
    """The API refused a request: its status, its message and the problems it listed."""

    def __init__(self, status: int, message: str, errors: list[str]) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


def path(*segments: str) -> str:
    """An API path of ``segments``, each quoted (a job name keeps its ``/``: the API's routes take it whole)."""
    return "/v1/" + "/".join(quote(segment, safe="/") for segment in segments)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class ApiClient:
    """Requests to the API application ``api``, in the same process, with ``token``."""

    def __init__(self, api: ASGIApp, token: str) -> None:
        self._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=api), base_url="http://agent",
                                       headers=bearer(token))

    async def call(self, method: str, url: str, *, json: Any = None, params: dict[str, Any] | None = None
                   ) -> httpx.Response:
        """The API's answer; :class:`ApiFailure` for an error."""
        response = await self._http.request(method, url, json=json, params=params)
        if response.is_error:
            try:
                body = response.json()
                message, errors = str(body["error"]), [str(e) for e in body.get("errors", [])]
            except (ValueError, KeyError, TypeError):
                message, errors = response.text, []
            raise ApiFailure(response.status_code, message, errors)
        return response

    async def get(self, url: str, **params: Any) -> Any:
        """The JSON the API answers to ``GET url``."""
        return (await self.call("GET", url, params=params)).json()


FORWARDED = ("type", "asgi", "http_version", "method", "scheme", "server", "client", "query_string",
             "extensions", "state", "subprotocols")
"""What of a request's scope reaches the API: not the UI's routing, nor its session."""
STREAMS = re.compile(r"/stream/(?P<route>events|allocations/[^/]+/logs/[^/]+)")
"""What the browser may read through :class:`StreamForwarder`: these two API routes, and nothing else."""
SOCKETS = re.compile(r"/ws/(?P<route>allocations/[^/]+/exec)")
"""The WebSocket the browser may open through :class:`StreamForwarder`: the API's interactive exec."""


class StreamForwarder:
    """``GET <session>/stream/<route>?query`` (under a session's prefix) answered by the API's
    ``GET /v1/<route>?query``, streamed as the API sends it, for a signed-in session: the event stream
    (which pages follow to know when to refresh) and a followed log. The WebSocket
    ``<session>/ws/allocations/{id}/exec?query`` likewise becomes the API's
    ``/v1/allocations/{id}/exec?query`` (:mod:`herder.agent.exec_ws`), for a signed-in session whose
    handshake comes from the UI's own origin. The token is added here; the session cookie does not go on
    to the API, whose own checks of a WebSocket (the token, ``Origin``) then run as for any client (its
    ``Host`` was checked in front of the UI, :mod:`herder.agent.samesite`)."""

    def __init__(self, api: ASGIApp, sessions: Sessions) -> None:
        self.api = api
        self.sessions = sessions
        self.token = sessions.token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = HTTPConnection(scope)
        route = connection.url.path.removeprefix(self.sessions.prefix(connection.path_params["session"]))
        if scope["type"] == "websocket":
            matched = SOCKETS.fullmatch(route)
            refusal = socket_refusal(connection, self.sessions)
        else:
            matched = STREAMS.fullmatch(route) if scope["method"] == "GET" else None
            refusal = None if self.sessions.signed_in(connection) else (401, "sign in first")
        # Refused before anything of the API is reached (a WebSocket's refusal answers its handshake).
        if matched is None:
            await PlainTextResponse("not found", status_code=404)(scope, receive, send)
            return
        if refusal is not None:
            await PlainTextResponse(refusal[1], status_code=refusal[0])(scope, receive, send)
            return
        target = "/v1/" + matched["route"]
        headers = [(name, value) for name, value in scope["headers"]
                   if name not in (b"authorization", b"cookie")]
        headers += [(name.lower().encode(), value.encode()) for name, value in bearer(self.token).items()]
        inner = {key: value for key, value in scope.items() if key in FORWARDED}
        inner |= {"path": target, "raw_path": quote(target).encode(), "root_path": "", "headers": headers}
        await self.api(inner, receive, send)
