"""Who may use the UI, and what a page may do in the browser.

The token is asked once, by the login form, and never leaves the agent again: the browser holds a
session cookie signed with a key derived from the token (a session dies with a changed token), and
the session says whether its holder gave the token. Every form that changes something carries the
session's CSRF token and must come from the UI's own origin. Every answer under ``/ui/`` has a
Content-Security-Policy that allows no inline script, only the UI's own files.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from urllib.parse import parse_qsl, urlsplit

from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "herder_ui"
SESSION_MAX_AGE = 12 * 3600
"""Seconds a session lasts after the token was given; the cookie itself ends with the browser's session."""

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


class Forbidden(Exception):
    """A form the UI did not serve, or from another origin."""


def session_middleware(token: str, *, path: str, secure: bool) -> Middleware:
    """The signed session cookie. Its key is derived from ``token`` (so that it is not the token, and a new
    token ends every session); without a token it is random, and the session only holds the CSRF token."""
    key = (hmac.new(token.encode(), b"herder ui session", hashlib.sha256).hexdigest() if token
           else secrets.token_hex(32))
    return Middleware(SessionMiddleware, secret_key=key, session_cookie=COOKIE, max_age=None, path=path,
                      same_site="strict", https_only=secure)


def csrf_token(request: Request) -> str:
    """The session's CSRF token, which each form of the page carries (created with the session)."""
    value = request.session.get("csrf")
    if not isinstance(value, str):
        value = request.session["csrf"] = secrets.token_urlsafe(32)
    return value


def same_origin(request: HTTPConnection) -> bool:
    """Whether the request says it comes from the UI's own origin. Browsers send ``Origin`` with every
    POST (``Referer`` where an old one does not); a request with neither is judged by its CSRF token alone."""
    claimed = request.headers.get("origin") or request.headers.get("referer")
    if not claimed:
        return True
    here = urlsplit(str(request.base_url))
    there = urlsplit(claimed)
    # A WebSocket's own URL is ws:// (wss://), the page that opened it http:// (https://).
    scheme = {"ws": "http", "wss": "https"}.get(here.scheme, here.scheme)
    return (there.scheme, there.netloc) == (scheme, here.netloc)


def socket_refusal(connection: HTTPConnection, token: str) -> tuple[int, str] | None:
    """Why the handshake of a WebSocket of the UI's is refused (an HTTP status and a message), or None. A
    browser sends the session cookie with a handshake that a page of any site opens, so besides the session
    it must show the UI's own ``Origin`` (which a browser always sends: cross-site WebSocket hijacking)."""
    if not signed_in(connection, token):
        return 401, "sign in first"
    if "origin" not in connection.headers or not same_origin(connection):
        return 403, f"a WebSocket from origin {connection.headers.get('origin')!r}, not the UI's own"
    return None


async def read_form(request: Request) -> dict[str, str]:
    """The fields of a form the UI served (URL-encoded: the UI's forms upload no file).

    :raises Forbidden: from another origin, or without the session's CSRF token.
    """
    if not same_origin(request):
        raise Forbidden("a form from another site")
    fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
    expected = request.session.get("csrf")
    if not isinstance(expected, str) or not hmac.compare_digest(fields.get("csrf", "").encode(), expected.encode()):
        raise Forbidden("a form without this session's token: reload the page and try again")
    return fields


def signed_in(request: HTTPConnection, token: str) -> bool:
    """Whether the request's session gave the token, less than :data:`SESSION_MAX_AGE` ago (always, when the
    agent has none)."""
    since = request.session.get("signed_in")
    return not token or (isinstance(since, int | float) and 0 <= time.time() - since < SESSION_MAX_AGE)


def sign_in(request: Request, token: str, given: str) -> bool:
    """Open the session if ``given`` is the token (compared in constant time)."""
    if not hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8")):
        return False
    request.session.clear()  # a new session: nothing chosen before the login survives it
    request.session["signed_in"] = time.time()
    return True


class SecurityHeaders:
    """The headers of :data:`HEADERS` on every answer, and no caching of one that holds data."""

    def __init__(self, app: ASGIApp, static: str) -> None:
        self.app = app
        self.static = static

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cacheable = scope["path"].startswith(self.static)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    headers[name] = value
                if not cacheable:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        await self.app(scope, receive, send_with_headers)

