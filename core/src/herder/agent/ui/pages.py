"""The UI's pages and the actions of their forms.

Each page is complete HTML (it reads without JavaScript); its live parts are also served alone
(``?fragment=NAME``), which ``static/ui.js`` fetches again when the event stream reports a change.
An action is a form's POST that calls the API and redirects back with what happened (so that reloading
a page never repeats an action). A page of its own is a route here and a template; an allocation's
tasks link to their pages by task (logs, and a running task's terminal).
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
from herder.agent.ui.security import Forbidden, csrf_token, read_form, sign_in, signed_in

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
    """The pages of the UI mounted at ``prefix``, over the API application ``api``."""

    def __init__(self, api: ASGIApp, token: str, prefix: str) -> None:
        self.api = ApiClient(api, token)
        self.token = token
        self.prefix = prefix
        self.streams = StreamForwarder(api, token, prefix)
        self.templates = Environment(loader=PackageLoader("herder.agent.ui", "templates"), autoescape=True,
                                     undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.filters["size"] = size
        self.templates.globals.update(link=self.link, signals=SIGNALS)

    def routes(self) -> list[BaseRoute]:
        page, act = self.page, self.action
        return [
            Route("/", page(self.jobs)),
            Route("/login", self.login, methods=["GET", "POST"]),
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
            Mount("/static", StaticFiles(packages=[("herder.agent.ui", "static")])),
        ]

    # -- rendering ---------------------------------------------------------------

    def link(self, *segments: str, **query: str) -> str:
        """The URL of a UI page: ``link("jobs", name)``; a job's name keeps its ``/``."""
        url = self.prefix + "/" + "/".join(quote(segment, safe="/") for segment in segments)
        return url + ("?" + urlencode(query) if query else "")

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
            request=request, csrf=csrf_token(request), flashes=flashes, logout=bool(self.token), **context)
        return HTMLResponse(html, status_code=status)

    def flash(self, request: Request, kind: str, text: str) -> None:
        """A message for the next page the session shows."""
        request.session.setdefault("flash", []).append([kind, text[:FLASH_MAX]])

    def page(self, handler: Handler) -> Handler:
        """A page (or its fragment) for a signed-in session; the API's errors become an error page."""

        @functools.wraps(handler)
        async def guarded(request: Request) -> Response:
            if not signed_in(request, self.token):
                if "fragment" in request.query_params:
                    return PlainTextResponse("sign in first", status_code=401)
                return self.ask_token(request, then=request.url.path)
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
            if not signed_in(request, self.token):
                return self.ask_token(request, then=request.url.path.rpartition("/")[0])
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

    def ask_token(self, request: Request, *, then: str, failed: bool = False) -> HTMLResponse:
        """The form that asks for the token (401), in place of the page ``then``, shown once signed in."""
        return self.render(request, "login.html", status=401, failed=failed, then=then)

    async def login(self, request: Request) -> Response:
        """The token, given (once: the session remembers it was); then the page it was asked for."""
        if signed_in(request, self.token):
            return RedirectResponse(self.link(), status_code=303)
        if request.method == "GET":
            return self.ask_token(request, then=self.link())
        try:
            fields = await read_form(request)
        except Forbidden as exc:
            return self.render(request, "error.html", status=403, message=f"refused: {exc}", errors=[])
        then = fields.get("then", "")
        if not then.startswith(self.prefix + "/"):  # only a page of the UI: not a way to send people elsewhere
            then = self.link()
        if sign_in(request, self.token, fields.get("token", "")):
            return RedirectResponse(then, status_code=303)
        return self.ask_token(request, then=then, failed=True)

    async def logout(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        request.session.clear()
        return "signed out", self.link("login")

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
        return f"launched {child['name']}", self.link("jobs", child["name"])

    async def dispatch(self, request: Request, fields: dict[str, str]) -> tuple[str, str | None]:
        body = {"meta": parse_meta(fields.get("meta", "")),
                "payload": base64.b64encode(fields.get("payload", "").encode()).decode()}
        child = (await self.api.call("POST", path("jobs", request.path_params["name"], "dispatch"),
                                     json=body)).json()
        return f"dispatched {child['name']}", self.link("jobs", child["name"])

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
        follow = self.link("stream", "allocations", alloc["id"], "logs", task,
                           stream=stream, offset=str(end), follow="true")
        return self.render(request, "logs.html", alloc=alloc, task=task, stream=stream,
                           text=response.content.decode("utf-8", "replace"), follow=follow)

    async def terminal(self, request: Request) -> Response:
        """A terminal in a task (``static/terminal.js``, over the WebSocket ``/ui/ws/allocations/{id}/exec``)."""
        alloc = await self.api.get(path("allocations", request.path_params["alloc_id"]))
        task = request.path_params["task"]
        if task not in alloc["tasks"]:
            raise ApiFailure(404, f"allocation {alloc['id']} has no task {task!r}", [])
        socket = self.link("ws", "allocations", alloc["id"], "exec")
        return self.render(request, "exec.html", alloc=alloc, task=task, socket=socket,
                           command=request.query_params.get("command", EXEC_COMMAND))
