"""Who may use the API: the bearer token, and what a WebSocket handshake must show besides.

A WebSocket is checked before it is accepted, whatever its route: a browser
opens one to any address, ``127.0.0.1`` included, from a page of any site, and
sends no header a page could choose except the subprotocols it offers. So:

- with a ``token``, the handshake carries it, as ``Authorization: Bearer T``
  (the command line) or, from a browser that cannot set that header, as the
  subprotocol offer ``herder.token.<base64url(T) without padding>``;
- an ``Origin`` (which a browser always sends, and a page cannot forge) must
  be the agent's own: a page of another site cannot drive the agent
  (cross-site WebSocket hijacking), even with no token configured.

Its ``Host`` must name the agent, as every request's must (DNS rebinding):
:class:`herder.agent.samesite.SameSite` checks it in front of both listeners.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any

from herder.agent.samesite import origin_refusal

PUBLIC_PATHS = frozenset({"/.well-known/jwks.json"})
"""The only routes served without the token (GET and HEAD only): the public keys that verify workload
identity tokens. A service a task presents its token to must verify it without any credential of the
agent's, as with Nomad, whose ``/.well-known/jwks.json`` is unauthenticated too; public keys tell
nothing that helps forge a token."""


def public(scope: Mapping[str, Any]) -> bool:
    """Whether the HTTP request ``scope`` is one of :data:`PUBLIC_PATHS`, read without the token."""
    return scope.get("method") in ("GET", "HEAD") and scope.get("path") in PUBLIC_PATHS


TOKEN_PROTOCOL = "herder.token."
"""The prefix of the subprotocol offer that carries the token (base64url, without padding)."""

TOKEN_FILE_HELP = "as root on the agent's host, the herder command line reads it from <data_dir>/agent.token"
TOKEN_HELP = f"{TOKEN_FILE_HELP}; or set HERDER_TOKEN"
"""Where a client refused for want of the token finds it (:mod:`herder.agent.credential`)."""


def token_matches(token: str, authorization: bytes | str | None) -> bool:
    """Whether an ``Authorization`` header carries ``token`` as its bearer token (constant-time)."""
    if isinstance(authorization, bytes):
        authorization = authorization.decode("latin-1")
    scheme, _, given = (authorization or "").partition(" ")
    given = given.strip() if scheme.lower() == "bearer" else ""
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def offered_protocols(headers: Mapping[bytes, bytes]) -> list[str]:
    """The subprotocols a WebSocket handshake offers (``Sec-WebSocket-Protocol``), in order."""
    offer = headers.get(b"sec-websocket-protocol", b"").decode("latin-1")
    return [name.strip() for name in offer.split(",") if name.strip()]


def _offered_token(protocols: Iterable[str]) -> bytes | None:
    for protocol in protocols:
        if protocol.startswith(TOKEN_PROTOCOL):
            encoded = protocol[len(TOKEN_PROTOCOL):]
            try:
                return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (binascii.Error, ValueError):
                return None
    return None


def websocket_refusal(scope: MutableMapping[str, Any], token: str, *,
                      authorized: Callable[[Mapping[bytes, bytes]], bool] | None = None) -> tuple[int, str] | None:
    """Why the WebSocket handshake ``scope`` is refused (an HTTP status and a message), or None.

    ``authorized`` tells whether the headers carry the token, where a listener takes it otherwise than
    as ``Authorization: Bearer`` (the Nomad-compatible one: ``X-Nomad-Token``).
    """
    headers = dict(scope.get("headers", []))
    carried = authorized(headers) if authorized is not None else token_matches(token, headers.get(b"authorization"))
    if token and not carried:
        offered = _offered_token(offered_protocols(headers))
        if offered is None or not hmac.compare_digest(offered, token.encode("utf-8")):
            return 401, (f"missing or wrong token (Authorization: Bearer <token>, or the subprotocol "
                         f"{TOKEN_PROTOCOL}<base64url token>; {TOKEN_HELP})")
    foreign = origin_refusal(scope)
    return None if foreign is None else (403, f"a WebSocket: {foreign}")
