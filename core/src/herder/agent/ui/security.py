"""Who may use the UI, and what a page may do in the browser.

The token is asked once, by the login form, and never leaves the agent again. Giving it opens a session,
which the agent records (:class:`Sessions`: signing out ends it, and so does a restart or a changed token)
under a random secret of its own, and which needs two things at once: the session's URL prefix
``/ui/s/<secret>/``, under which all its pages are, and a signed cookie whose ``Path`` is that prefix.

Why the secret is in the URL: a browser scopes cookies by host, never by port, and ``SameSite`` counts
every port of ``127.0.0.1`` as the same site; so a cookie alone, whatever its flags, is also sent to a
server on another port of the agent's address (another local user's, a task's), which needs only to send
the browser to its own ``/ui/`` to catch it and replay it. The session's cookie is sent only under its
secret prefix, which another origin cannot learn (``Referrer-Policy: same-origin``: no other port gets a
``Referer``), and neither the URL nor the cookie is a session without the other. (The alternatives: a
session recorded but carried by the cookie alone is caught the same way; HTTP Basic credentials, which
browsers keep per origin, are the token itself sent with every request, asked by the browser's own dialog
and never forgotten until it closes.) A bookmarked page of an ended session asks for the token again,
then shows that page in the new session.

Every form that changes something carries the session's CSRF token and must come from the UI's own
origin. Every answer under ``/ui/`` has a Content-Security-Policy that allows no inline script, only the
UI's own files.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from base64 import b64decode, b64encode
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import itsdangerous
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "herder_ui"
SESSION_MAX_AGE = 12 * 3600
"""Seconds a session lasts after the token was given; its cookie itself ends with the browser's session."""
EXPIRED = "expires=Thu, 01 Jan 1970 00:00:00 GMT"

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


class Sessions:
    """The sessions that gave the token (any session, for an agent without one), recorded by their secret:
    the UI under ``mount`` serves a session's pages under ``mount/s/<secret>/``."""

    def __init__(self, token: str, mount: str) -> None:
        self.token = token
        self.mount = mount
        self.opened: dict[str, float] = {}
        """When each session's secret was given out."""

    def prefix(self, secret: str) -> str:
        return f"{self.mount}/s/{secret}"

    def cookie_path(self, session: dict[str, Any]) -> str:
        """Where the browser sends the cookie of ``session``: its own prefix; before signing in, the
        login form (whose CSRF token it holds)."""
        secret = session.get("secret")
        return self.prefix(secret) + "/" if isinstance(secret, str) else self.mount + "/login"

    def signed_in(self, connection: HTTPConnection) -> bool:
        """Whether the request is under the prefix of its own session, opened less than
        :data:`SESSION_MAX_AGE` ago and not closed since."""
        secret = connection.session.get("secret")
        since = self.opened.get(secret) if isinstance(secret, str) else None
        return (since is not None and 0 <= time.time() - since < SESSION_MAX_AGE
                and connection.url.path.startswith(self.prefix(str(secret)) + "/"))

    def open(self, request: Request, given: str) -> str | None:
        """The prefix of a new session if ``given`` is the token (compared in constant time), else None."""
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode("utf-8")):
            return None
        now = time.time()
        self.opened = {secret: since for secret, since in self.opened.items() if now - since < SESSION_MAX_AGE}
        secret = secrets.token_urlsafe(24)
        self.opened[secret] = now
        request.session.clear()  # a new session: nothing chosen before the login survives it
        request.session["secret"] = secret
        return self.prefix(secret)

    def close(self, request: Request) -> None:
        """End the request's session: its cookie, and its secret, which no copy of the cookie opens again."""
        self.opened.pop(str(request.session.get("secret")), None)
        request.session.clear()


class SessionCookie:
    """The session (``scope["session"]``) in a cookie signed with a key derived from the token (so that it
    is not the token, and a new token ends every session; random without a token), sent by the browser
    only where :meth:`Sessions.cookie_path` says: HttpOnly, ``SameSite=Strict``, Secure over TLS."""

    def __init__(self, app: ASGIApp, sessions: Sessions, *, secure: bool) -> None:
        self.app = app
        self.sessions = sessions
        token = sessions.token
        key = (hmac.new(token.encode(), b"herder ui session", hashlib.sha256).hexdigest() if token
               else secrets.token_hex(32))
        self.signer = itsdangerous.TimestampSigner(key)
        self.flags = "httponly; samesite=strict" + ("; secure" if secure else "")

    def load(self, scope: Scope) -> dict[str, Any]:
        cookie = HTTPConnection(scope).cookies.get(COOKIE)
        try:
            session = json.loads(b64decode(self.signer.unsign(cookie))) if cookie else {}
        except (itsdangerous.BadSignature, ValueError):
            return {}
        return session if isinstance(session, dict) else {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        initial = self.load(scope)
        scope["session"] = dict(initial)

        async def send_with_cookie(message: Message) -> None:
            session = scope["session"]
            if message["type"] == "http.response.start" and session != initial:
                headers = MutableHeaders(scope=message)
                before, after = self.sessions.cookie_path(initial), self.sessions.cookie_path(session)
                if initial and (before != after or not session):  # one cookie at a time in the browser
                    headers.append("Set-Cookie", f"{COOKIE}=; path={before}; {EXPIRED}; {self.flags}")
                if session:
                    value = self.signer.sign(b64encode(json.dumps(session).encode())).decode()
                    headers.append("Set-Cookie", f"{COOKIE}={value}; path={after}; {self.flags}")
            await send(message)

        await self.app(scope, receive, send_with_cookie)


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


def socket_refusal(connection: HTTPConnection, sessions: Sessions) -> tuple[int, str] | None:
    """Why the handshake of a WebSocket of the UI's is refused (an HTTP status and a message), or None. A
    browser sends the session cookie with a handshake that a page of any site opens, so besides the session
    it must show the UI's own ``Origin`` (which a browser always sends: cross-site WebSocket hijacking)."""
    if not sessions.signed_in(connection):
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

