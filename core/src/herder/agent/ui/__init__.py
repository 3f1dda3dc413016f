"""The web UI at ``/ui/`` (SPEC §16): pages of jobs, allocations, task states and events, stats and
live logs, with the actions the command line has, over the agent's own API.

Server-rendered HTML (Jinja2, every value escaped) that reads without JavaScript, and one small script
of our own (``static/ui.js``): no build step. The pages call the API in-process with the agent's token
(:mod:`herder.agent.ui.client`); the browser gives the token once, at the login form, and holds a signed
session cookie instead (:mod:`herder.agent.ui.security`).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware

from herder.agent.ui.pages import Pages
from herder.agent.ui.security import SecurityHeaders, session_middleware

PREFIX = "/ui"
MAX_FORM = 64 << 10
"""The largest body a request of the UI may send: a form with a dispatch payload (at most 16 KiB, up to
three times that URL-encoded) and its meta."""


def serves(path: str) -> bool:
    """Whether a request for ``path`` is the UI's, which authenticates its requests itself."""
    return path == PREFIX or path.startswith(PREFIX + "/")


def mount(api: Starlette, *, token: str, secure: bool) -> None:
    """Serve the UI under :data:`PREFIX` of the API application ``api`` (whose ``token`` the UI asks for;
    ``secure``: the agent serves TLS, and the session cookie is sent only over it)."""
    pages = Pages(api, token, PREFIX)
    ui = Starlette(routes=pages.routes(), middleware=[
        Middleware(SecurityHeaders, static=PREFIX + "/static/"),
        session_middleware(token, path=PREFIX + "/", secure=secure)])
    api.mount(PREFIX, ui)
