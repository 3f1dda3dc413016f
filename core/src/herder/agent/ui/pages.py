"""The UI's pages and the actions of their forms.

Each page is complete HTML (it reads without JavaScript); its live parts are also served alone
(``?fragment=NAME``), which ``static/ui.js`` fetches again when the event stream reports a change.
An action is a form's POST that calls the API and redirects back with what happened (so that reloading
a page never repeats an action). A page of its own is a route here and a template; an allocation's
tasks link to their pages by task (logs, and a running task's terminal). The pages of a session are under
its own prefix ``/ui/s/<secret>/`` (:mod:`herder.agent.ui.security`), which their links keep; the login
form and the static files are outside any session, and any other URL of the UI asks for the token, then
shows its page (``/ui/jobs/web``: a link without a session's prefix, or the page of an ended session).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from herder.agent.ui.client import ApiClient, ApiFailure, StreamForwarder, path
from herder.agent.ui.security import Forbidden, Sessions, csrf_token, read_form

LOG_TAIL = 64 << 10
"""Bytes of a log a log page shows at first; the script then follows from there."""
FLASH_MAX = 2000
"""Characters of a message kept for the next page (the session is a cookie)."""
EXEC_COMMAND = "/bin/sh"
"""The command a terminal page offers to run at first."""
SIGNALS = ("SIGHUP", "SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGQUIT", "SIGKILL")

Handler = Callable[[Request], Awaitable[Response]]
Action = Callable[[Request, dict[str, str]], Awaitable[tuple[str, str | None]]]


def size(value: int | None) -> str:
    """Bytes in MiB, as ``herder alloc status -stats`` shows them; ``-`` when unknown."""
    return "-" if value is None else f"{value / (1 << 20):.1f} MiB"


def parse_meta(text: str) -> dict[str, str]:
    """The dispatch form's meta, one ``KEY=VALUE`` a line (as ``herder job dispatch -meta``)."""
    meta = {}
    for line in text.splitlines():
        if line.strip():
            key, sep, value = line.partition("=")
            if not sep or not key.strip():
                raise ApiFailure(400, "cannot dispatch the job", [f"meta: {line.strip()!r} is not KEY=VALUE"])
            meta[key.strip()] = value
    return meta


class Pages:
    """The pages of the UI mounted at ``sessions.mount``, over the API application ``api``."""

    def __init__(self, api: ASGIApp, sessions: Sessions) -> None:
        self.api = ApiClient(api, sessions.token)
        self.sessions = sessions
        self.token = sessions.token
        self.prefix = sessions.mount
        self.streams = StreamForwarder(api, sessions)
        self.templates = Environment(loader=PackageLoader("herder.agent.ui", "templates"), autoescape=True,
                                     undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.filters["size"] = size
        self.templates.globals.update(outside=self.outside, signals=SIGNALS)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/login", self.login, methods=["GET", "POST"]),
            Mount("/static", StaticFiles(packages=[("herder.agent.ui", "static")])),
            Mount("/s/{session}", routes=self.session_routes()),
            Route("/{page:path}", self.elsewhere),
        ]

    def session_routes(self) -> list[BaseRoute]:
        page, act = self.page, self.action
        return [
            Route("/", page(self.jobs)),
            Route("/logout", act(self.logout), methods=["POST"]),
            Route("/jobs/{name:path}/stop", act(self.stop), methods=["POST"]),
            Route("/jobs/{name:path}/force", act(self.force), methods=["POST"]),
            Route("/jobs/{name:path}/dispatch", act(self.dispatch), methods=["POST"]),
            Route("/jobs/{name:path}", page(self.job)),
            Route("/allocations/{alloc_id}/restart", act(self.restart), methods=["POST"]),
            Route("/allocations/{alloc_id}/signal", act(self.signal), methods=["POST"]),
            Route("/allocations/{alloc_id}/logs/{task}", page(self.logs)),
            Route("/allocations/{alloc_id}/tasks/{task}/exec", page(self.terminal)),
            Route("/allocations/{alloc_id}", page(self.allocation)),
            Route("/stream/{route:path}", self.streams),
            WebSocketRoute("/ws/{route:path}", self.streams),
        ]

    # -- rendering ---------------------------------------------------------------

    def base(self, request: Request) -> str:
        """The prefix of the request's pages: its session's, or the UI's outside one."""
        secret = request.path_params.get("session")
        return self.prefix if secret is None else self.sessions.prefix(secret)

    def link(self, request: Request, *segments: str, **query: str) -> str:
        """The URL of a page of the request's session: ``link(request, "jobs", name)``; a job's name keeps
        its ``/``. (Templates call it ``link("jobs", name)``.)"""
        url = self.base(request) + "/" + "/".join(quote(segment, safe="/") for segment in segments)
        return url + ("?" + urlencode(query) if query else "")

    def outside(self, *segments: str) -> str:
        """The URL of what the UI serves outside any session: the login form, the static files."""
        return self.prefix + "/" + "/".join(segments)

    def render(self, request: Request, template: str, status: int = 200, *,
               fragments: tuple[str, ...] | None = None, **context: Any) -> HTMLResponse:
        """``template`` with ``context``: the page or, for a page with ``fragments`` asked for one
        (``?fragment=NAME``), that part of it (template ``_NAME.html``)."""
        fragment = request.query_params.get("fragment") if fragments is not None else None
        if fragments is not None and fragment is not None:
            if fragment not in fragments:
                return HTMLResponse("no such fragment", status_code=404)
            template = f"_{fragment}.html"
            flashes: list[list[str]] = []
        else:
            flashes = request.session.pop("flash", [])
        html = self.templates.get_template(template).render(
            request=request, link=functools.partial(self.link, request), csrf=csrf_token(request), flashes=flashes,
            logout=bool(self.token) and self.sessions.signed_in(request), **context)
        return HTMLResponse(html, status_code=status)

    def flash(self, request: Request, kind: str, text: str) -> None:
        """A message for the next page the session shows."""
        request.session.setdefault("flash", []).append([kind, text[:FLASH_MAX]])

    def page(self, handler: Handler) -> Handler:
        """A page (or its fragment) for a signed-in session; the API's errors become an error page."""

        @functools.wraps(handler)
        async def guarded(request: Request) -> Response:
            if not self.sessions.signed_in(request):
                if "fragment" in request.query_params:
                    return PlainTextResponse("sign in first", status_code=401)
                return self.ask_token(request, then=self.page_of(request))
            try:
                return await handler(request)
            except ApiFailure as exc:
                return self.render(request, "error.html", status=exc.status, message=exc.message, errors=exc.errors)

        return guarded

    def action(self, handler: Action) -> Handler:
        """A form's POST: the action, what it did (or the API's refusal) told on the page redirected to:
        the one it names, else the page of what was acted on (the URL without its last part)."""

        @functools.wraps(handler)
        async def guarded(request: Request) -> Response:
            if not self.sessions.signed_in(request):
                return self.ask_token(request, then=self.page_of(request).rpartition("/")[0] or "/")
            try:
                fields = await read_form(request)
            except Forbidden as exc:
                return self.render(request, "error.html", status=403, message=f"refused: {exc}", errors=[])
            back: str | None = None
            try:
                message, back = await handler(request, fields)
                self.flash(request, "info", message)
            except ApiFailure as exc:
                self.flash(request, "error", "; ".join([exc.message, *exc.errors]))
            return RedirectResponse(back or request.url.path.rpartition("/")[0], status_code=303)

        return guarded

    # -- signing in --------------------------------------------------------------------

    def page_of(self, request: Request) -> str:
        """The page a request is for, without its prefix: ``/jobs/web``."""
        return request.url.path.removeprefix(self.base(request)) or "/"

    def ask_token(self, request: Request, *, then: str, failed: bool = False) -> Response:
        """The form that asks for the token (401), in place of the page ``then`` of a session, shown once
        signed in. An agent without a token opens a session at once."""
        if not self.token and (prefix := self.sessions.open(request, "")):
            return RedirectResponse(prefix + then, status_code=303)
        if "secret" in request.session:  # an ended session's: the form's CSRF token goes to the login's cookie
            request.session.clear()
        return self.render(request, "login.html", status=401, failed=failed, then=then)

    async def elsewhere(self, request: Request) -> Response:
        """A URL of the UI outside a session's prefix: its page in a session, once the token is given."""
        return self.ask_token(request, then=self.page_of(request))

    async def login(self, request: Request) -> Response:
        """The token, given (once: the session remembers it was); then the page it was asked for."""
        if request.method == "GET":
            return self.ask_token(request, then="/")
        try:
            fields = await read_form(request)
        except Forbidden as exc:
            return self.render(request, "error.html", status=403, message=f"refused: {exc}", errors=[])
        then = fields.get("then", "")
        if not then.startswith("/") or then.startswith("//"):  # a page of the session, not another site's
            then = "/"
        if prefix := self.sessions.open(request, fields.get("token", "")):
            return RedirectResponse(prefix + then, status_code=303)
        return self.ask_token(request, then=then, failed=True)

    async def logout(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        self.sessions.close(request)
        return "signed out", self.outside("login")

    # -- jobs --------------------------------------------------------------------

    async def jobs(self, request: Request) -> Response:
        return self.render(request, "jobs.html", fragments=("jobs",), jobs=(await self.api.get(path("jobs")))["jobs"])

    async def job(self, request: Request) -> Response:
        job = await self.api.get(path("jobs", request.path_params["name"]))
        return self.render(request, "job.html", fragments=("job",), job=job)

    async def stop(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        name = request.path_params["name"]
        await self.api.call("DELETE", path("jobs", name))
        return f"job {name} stopping", None

    async def force(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        child = (await self.api.call("POST", path("jobs", request.path_params["name"], "periodic", "force"))).json()
        return f"launched {child['name']}", self.link(request, "jobs", child["name"])

    async def dispatch(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        body = {"meta": parse_meta(fields.get("meta", "")),
                "payload": base64.b64encode(fields.get("payload", "").encode()).decode()}
        child = (await self.api.call("POST", path("jobs", request.path_params["name"], "dispatch"),
                                     json=body)).json()
        return f"dispatched {child['name']}", self.link(request, "jobs", child["name"])

    # -- allocations -------------------------------------------------------------

    async def allocation(self, request: Request) -> Response:
        alloc_id = request.path_params["alloc_id"]
        alloc = await self.api.get(path("allocations", alloc_id))
        # The stats fragment alone needs no status; the tasks fragment no stats.
        wanted = request.query_params.get("fragment")
        stats = await self.api.get(path("allocations", alloc["id"], "stats")) if wanted != "tasks" else None
        return self.render(request, "allocation.html", fragments=("tasks", "stats"), alloc=alloc, stats=stats)

    async def restart(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        body = {"task": fields.get("task") or None, "reason": "Restart requested in the web UI"}
        done = (await self.api.call("POST", path("allocations", request.path_params["alloc_id"], "restart"),
                                    json=body)).json()
        return str(done["message"]), None

    async def signal(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        body = {"task": fields.get("task") or None, "signal": fields.get("signal", "")}
        done = (await self.api.call("POST", path("allocations", request.path_params["alloc_id"], "signal"),
                                    json=body)).json()
        return str(done["message"]), None

    async def logs(self, request: Request) -> Response:
        """The end of a task's log; the script follows it from there."""
        alloc_id, task = request.path_params["alloc_id"], request.path_params["task"]
        stream = "stderr" if request.query_params.get("stream") == "stderr" else "stdout"
        alloc = await self.api.get(path("allocations", alloc_id))
        response = await self.api.call("GET", path("allocations", alloc["id"], "logs", task),
                                       params={"stream": stream, "origin": "end", "offset": LOG_TAIL})
        end = int(response.headers["X-Herder-Log-Offset"]) + len(response.content)
        follow = self.link(request, "stream", "allocations", alloc["id"], "logs", task,
                           stream=stream, offset=str(end), follow="true")
        return self.render(request, "logs.html", alloc=alloc, task=task, stream=stream,
                           text=response.content.decode("utf-8", "replace"), follow=follow)

    async def terminal(self, request: Request) -> Response:
        """A terminal in a task (``static/terminal.js``, over the session's WebSocket ``ws/allocations/{id}/exec``)."""
        alloc = await self.api.get(path("allocations", request.path_params["alloc_id"]))
        task = request.path_params["task"]
        if task not in alloc["tasks"]:
            raise ApiFailure(404, f"allocation {alloc['id']} has no task {task!r}", [])
        socket = self.link(request, "ws", "allocations", alloc["id"], "exec")
        return self.render(request, "exec.html", alloc=alloc, task=task, socket=socket,
                           command=request.query_params.get("command", EXEC_COMMAND))
