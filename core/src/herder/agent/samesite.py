"""Requests of the agent's own site only: in front of both listeners, before anything of a body is read.

A browser sends a page's requests to any address, ``127.0.0.1`` included. A "simple" request (a POST of
``text/plain``, a form, multipart, no body at all) goes out without asking the server first; only its
answer is kept from the page. And a site whose name was made to resolve to the agent's address (DNS
rebinding) is, to the browser, the same origin as the agent: its page reads what it fetches. So every
request of herder's listener and of the Nomad-compatible one is held to three rules (:class:`SameSite`):

- **Host** names the agent (:class:`Hosts`): a loopback name or literal (``localhost``, 127.0.0.0/8,
  ``[::1]``), the address the listener is bound to, or a name of ``[agent] allowed_hosts``. Every route,
  reads and WebSocket handshakes included: a rebound page's requests carry its own name. A listener
  bound to every address (``0.0.0.0``, ``::``) is reached by names it cannot know: there, with a token
  and no ``allowed_hosts``, any ``Host`` is taken, as the token (which a rebinding page cannot know) is
  the credential; naming ``allowed_hosts`` makes the rule strict again.
- **Origin**, when a request that changes something (any method but GET, HEAD, OPTIONS) or a WebSocket
  handshake has one, is the agent's own: the scheme and ``Host`` of the request as the agent serves it.
  A browser sends it with every such request (``null`` from an opaque origin, refused too); a command
  line sends none. This refuses the bodiless actions (drain, force, gc, stop) of another site.
- **Content-Type** of a body of a request that changes something is JSON (``application/json``, or
  ``application/*+json``); the types a page may send unasked are never decoded. Nomad's command line
  sends its JSON without a ``Content-Type`` (a PUT of ``/v1/jobs``, a dispatch, ``system gc``), so the
  Nomad-compatible listener also takes a body without one; herder's command line says what it sends. The
  web UI's forms are URL-encoded: they carry the session's CSRF token (:mod:`herder.agent.ui.security`),
  and only ``Host`` and ``Origin`` apply to them.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from herder.agent import ui
from herder.client.config import Config, parse_bind

log = logging.getLogger("herder.agent")

Refuse = Callable[[int, str], ASGIApp]
"""A listener's answer to a refused request (a status and a message), in its own style."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOG_INTERVAL = 60.0
"""Seconds between two log lines of refusals: a page can send thousands; each line counts them."""
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})


@functools.lru_cache(maxsize=1024)  # every request asks, almost always for the same few names
def host_name(host: str) -> str:
    """The name of a ``Host`` header (``name[:port]``, ``[v6][:port]``, or a bind's host), lowercased,
    an IP address in its canonical spelling."""
    name = host.strip().lower()
    if name.startswith("["):
        name = name[1:].partition("]")[0]
    elif name.count(":") == 1:
        name = name.partition(":")[0]  # else a name without a port, or a bind's bare IPv6 address
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return name


@functools.lru_cache(maxsize=1024)
def names_loopback(name: str) -> bool:
    """Whether a host name (as :func:`host_name` gives it) is loopback without a lookup."""
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Hosts:
    """The names a listener answers to: loopback, ``bind`` (the address it is bound to), ``allowed``;
    any name on a wildcard bind with a ``token`` and no ``allowed`` (see the module)."""

    bind: str
    allowed: frozenset[str]
    token: bool

    @classmethod
    def of(cls, config: Config, bind: str) -> Hosts:
        """The names of the listener of ``config`` bound to ``bind`` (``host:port``)."""
        return cls(parse_bind(bind)[0], config.agent.allowed_hosts, bool(config.token))

    def admits(self, host: str) -> bool:
        """Whether a ``Host`` header names the agent."""
        name, bound = host_name(host), host_name(self.bind)
        if not name:
            return False
        if names_loopback(name) or name == bound or name in self.allowed:
            return True
        return self.token and not self.allowed and bound in ("0.0.0.0", "::")


def origin_refusal(scope: Scope) -> str | None:
    """Why the request's ``Origin`` is not the agent's own, or None (it has none, or the agent's)."""
    headers = _headers(scope)
    origin = headers.get(b"origin")
    if origin is None:
        return None
    scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
    own = f"{scheme}://{headers.get(b'host', b'').decode('latin-1').lower()}"
    if origin.decode("latin-1").lower().rstrip("/") != own:
        return f"a request from origin {origin.decode('latin-1')!r} (the agent's own is {own})"
    return None


def is_json(content_type: str) -> bool:
    """Whether a ``Content-Type`` says JSON: ``application/json`` or ``application/*+json``, any parameters."""
    kind, _, subtype = content_type.partition(";")[0].strip().lower().partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _headers(scope: Scope) -> Mapping[bytes, bytes]:
    return dict(scope.get("headers", []))


class SameSite:
    """In front of a listener's application: refuse (with ``refuse``, the listener's style of error) a
    request that breaks a rule of the module, before its body is read. ``untyped_json``: a body without
    a ``Content-Type`` is JSON (Nomad's clients send it so). Refusals are logged as a count, at most a
    line every :data:`LOG_INTERVAL` seconds."""

    def __init__(self, inner: ASGIApp, hosts: Hosts, refuse: Refuse, *, untyped_json: bool = False) -> None:
        self.inner = inner
        self.hosts = hosts
        self.refuse = refuse
        self.untyped_json = untyped_json
        self.refused = 0
        self.logged = -LOG_INTERVAL

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why the request (or WebSocket handshake) ``scope`` is refused (a status and a message), or None."""
        headers = _headers(scope)
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.hosts.admits(host):
            return 403, (f"Host {host!r} does not name this agent (a loopback address, the address it listens "
                         f"on, or a name of [agent] allowed_hosts)")
        if scope["type"] == "http" and scope["method"] in SAFE_METHODS:
            return None
        if (foreign := origin_refusal(scope)) is not None:
            return 403, foreign
        if scope["type"] != "http" or ui.serves(scope["path"]):
            return None
        content_type = headers.get(b"content-type", b"").decode("latin-1")
        has_body = headers.get(b"content-length", b"0").strip() not in (b"0", b"") or b"transfer-encoding" in headers
        if is_json(content_type) or (not content_type and (self.untyped_json or not has_body)):
            return None
        said = f"Content-Type {content_type!r}" if content_type else "no Content-Type"
        return 415, f"a body with {said} is not read: send it as application/json"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = self.refusal(scope) if scope["type"] in ("http", "websocket") else None
        if refusal is None:
            await self.inner(scope, receive, send)
            return
        self.tally(refusal[1])
        await self.refuse(*refusal)(scope, receive, send)

    def tally(self, reason: str) -> None:
        """Count a refusal; log the count (and the last reason) if none was logged for a while."""
        self.refused += 1
        now = time.monotonic()
        if now - self.logged >= LOG_INTERVAL:
            log.warning("refused %d cross-site request(s) since the last such line; the last: %s", self.refused,
                        reason)
            self.refused, self.logged = 0, now
