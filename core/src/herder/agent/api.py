"""The HTTP API under ``/v1/`` (SPEC §10), documented at ``/v1/openapi.json``.

Handlers are thin: they call the use cases of :class:`herder.app.Agent` and
shape the answer with the models of :mod:`herder.agent.models`. The errors of
the use cases become answers in one place, the exception handlers
(:class:`~herder.app.NotFound` 404, :class:`~herder.app.Conflict` 409, ...).
Every error is an :class:`~herder.agent.models.Error` body; a request the API
cannot understand is a 4xx, never a 500.
"""


import asyncio
import base64
import contextlib
import dataclasses
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, MutableMapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from herder import app
from herder.agent import exec_ws, metrics, models, rollouts, services, ui
from herder.agent.auth import TOKEN_HELP, public, token_matches, websocket_refusal
from herder.agent.events import EventLog, sse
from herder.agent.samesite import Hosts, SameSite
from herder.app import SELF_CHECK_INTERVAL, Agent, Conflict, NotFound
from herder.client.alloc_runner import AllocRunner, EventRecord
from herder.client.logtail import LogTail
from herder.client.replacements import Rescheduling
from herder.client.signing import SigningKeyError
from herder.errors import DispatchError, JobError, PlacementError
from herder.objects import TaskEvent, TaskStats
from herder.presentation import event_json, rfc3339

log = logging.getLogger("herder.agent")

MAX_BODY = 4 << 20
"""The largest request body accepted: a job file is a few KiB."""
LOG_CHUNK = 1 << 20
UNAUTHORIZED = f"missing or wrong token (Authorization: Bearer <token>; {TOKEN_HELP})"
FOLLOW_POLL = 0.25

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


def _error(status: int, message: str, errors: list[str] | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(models.Error(error=message, errors=errors or []).model_dump(), status_code=status,
                        headers=headers)


class Guard:
    """In front of the application: with a ``token``, a request without it is
    refused (401) before anything of it is read; a request body over ``limit``
    bytes is refused (413), whether it says its length or streams it."""

    def __init__(self, inner: ASGIApp, token: str = "", limit: int = MAX_BODY) -> None:
        self.inner = inner
        self.token = token
        self.limit = limit

    def authorized(self, headers: Mapping[bytes, bytes]) -> bool:
        """Whether the request's headers carry the token."""
        return token_matches(self.token, headers.get(b"authorization"))

    def refusal(self) -> ASGIApp:
        """The answer to a request without the token."""
        return _error(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A WebSocket of the UI's (its terminal) carries the session cookie, not the token: the UI checks the
        # session and the Origin itself (herder.agent.ui.client.StreamForwarder), then hands it to the API's route
        # with the token, where websocket_refusal runs as for any other. Every other WebSocket is checked here
        # (its Host, as every request's, in front: herder.agent.samesite).
        if (scope["type"] == "websocket" and not ui.serves(scope["path"])
                and (refusal := websocket_refusal(scope, self.token, authorized=self.authorized))):
            await _error(*refusal, headers={"WWW-Authenticate": "Bearer"} if refusal[0] == 401 else None)(
                scope, receive, send)
            return
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        # The web UI's pages check their session cookie themselves (a browser loading a page sends no bearer
        # header); its data comes from the routes below, through the app with the token (herder.agent.ui).
        if (self.token and not ui.serves(scope["path"]) and not public(scope)
                and not self.authorized(dict(scope.get("headers", [])))):
            await self.refusal()(scope, receive, send)
            return
        # The UI's forms are read before any credential is known (its sign-in form), so the agent would
        # hold a job-sized body for every connection of a client without the token: they get a form's.
        limit = min(self.limit, ui.MAX_FORM) if ui.serves(scope["path"]) else self.limit
        too_large = _error(413, f"request body over {limit} bytes")
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    if int(value) > limit:
                        await too_large(scope, receive, send)
                        return
                except ValueError:
                    await _error(400, "invalid Content-Length")(scope, receive, send)
                    return
        # A body without a length is read here first, up to the limit, then handed on.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > limit:
                await too_large(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.inner(scope, replay, send)


_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": models.Error, "description": text} for status, text in (
        (400, "Invalid request (an invalid job lists each problem with its path)"),
        (401, "Missing or wrong token"),
        (403, "A request of another site, or for a Host that does not name the agent"),
        (404, "Not found"),
        (409, "Conflict with the current state"),
        (413, "Request body too large"),
        (415, "A body not sent as application/json"),
        (422, "Malformed request"),
    )}


_SSE_EVENT: dict[str, Any] = {
    "type": "object", "description": "One server-sent event; `data` is, with its `index`, an Event as JSON "
                                     "(`task-event`) or an allocation's end: `alloc_id`, `alloc_name`, `status` "
                                     "(`alloc-status`)",
    "properties": {"id": {"type": "string"}, "event": {"type": "string", "enum": ["task-event", "alloc-status"]},
                   "data": {"type": "string"}}}


async def heartbeat(agent: Agent) -> None:
    """Pass the agent's own service check, from the event loop that serves the API:
    a loop that stops answering stops passing it."""
    while True:
        await asyncio.to_thread(agent.heartbeat)
        await asyncio.sleep(SELF_CHECK_INTERVAL)


def create_app(agent: Agent, events: EventLog) -> FastAPI:
    """The ASGI application of ``agent``, whose task events ``events`` records."""
    token = agent.config.token
    bearer = HTTPBearer(auto_error=False, description="The agent's `token`: the configured one, else the one "
                                                       "it keeps in `<data_dir>/agent.token`.")

    async def authorize(request: Request,
                        _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
        # Guard checked already; this documents the scheme, and stays right if the app is served without Guard.
        # A coroutine, as it never blocks: a plain function would cost every request a trip through the
        # thread pool (most of the agent's p99 under concurrent clients, bench/agent_api.py).
        if token and not token_matches(token, request.headers.get("authorization")):
            raise ApiError(401, UNAUTHORIZED)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        beating = asyncio.create_task(heartbeat(agent))
        try:
            yield
        finally:
            beating.cancel()

    api = FastAPI(title="herder agent", version=agent.version, openapi_url="/v1/openapi.json", docs_url=None,
                  redoc_url=None, dependencies=[Depends(authorize)], responses=_ERRORS, lifespan=lifespan)

    @api.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, exc.message, exc.errors, headers)

    # The use cases' errors, answered here rather than in each route.
    @api.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> JSONResponse:
        return _error(404, str(exc))

    @api.exception_handler(Conflict)
    async def conflict(request: Request, exc: Conflict) -> JSONResponse:
        return _error(409, str(exc))

    @api.exception_handler(JobError)
    async def invalid_job(request: Request, exc: JobError) -> JSONResponse:
        return _error(400, "invalid job", exc.errors)

    @api.exception_handler(DispatchError)
    async def refused_dispatch(request: Request, exc: DispatchError) -> JSONResponse:
        return _error(400, "cannot dispatch the job", exc.errors)

    @api.exception_handler(PlacementError)
    async def unplaceable(request: Request, exc: PlacementError) -> JSONResponse:
        return _error(409, f"cannot place the job: {exc}")

    @api.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in exc.errors()]
        return _error(422, "malformed request", problems)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @api.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, f"internal error: {type(exc).__name__}")

    AllocId = Annotated[str, Path(min_length=1, max_length=64, description="An allocation ID or a unique prefix.")]

    # -- the agent -------------------------------------------------------------
    # Reads that only take the client's locks briefly are async: no hop through the thread pool.
    # What may block (a submission, a stop, exec) runs in the pool, off the event loop.

    @api.get("/v1/health", response_model=models.Health, tags=["agent"])
    async def health() -> models.Health:
        return models.Health(status="draining" if agent.draining else "ok", version=agent.version,
                             node=agent.config.node_name, allocations=len(agent.allocs()))

    @api.get("/v1/drivers", response_model=models.Drivers, tags=["agent"])
    def drivers() -> models.Drivers:
        return models.Drivers.model_validate({"drivers": app.driver_rows(agent.hooks)})

    @api.get("/v1/plugins", response_model=models.Plugins, tags=["agent"])
    def plugins() -> models.Plugins:
        return models.Plugins.model_validate({"plugins": app.plugin_rows(agent.hooks)})

    @api.post("/v1/agent/drain", response_model=models.Done, tags=["agent"])
    def drain() -> models.Done:
        count = len(agent.begin_drain())
        return models.Done(message=f"stopping {count} allocation(s); the agent takes no new job")

    @api.put("/v1/system/gc", response_model=models.Collected, tags=["agent"])
    def system_gc() -> models.Collected:
        collected = agent.collect_garbage()
        return models.Collected(message=f"{len(collected.allocations)} allocation(s) removed, "
                                        f"{len(collected.jobs)} job(s) purged",
                                allocations=collected.allocations, jobs=collected.jobs)

    # -- jobs ----------------------------------------------------------------

    @api.post("/v1/jobs", response_model=models.JobSubmitted, tags=["jobs"])
    def submit(body: models.JobSubmit) -> models.JobSubmitted:
        if (body.text is None) == (body.job is None):
            raise ApiError(400, "give either text (a job file, with its format) or job (canonical JSON)")
        text, fmt = (body.text, body.format) if body.text is not None else (json.dumps(body.job), "json")
        index = events.last  # before the submission: its first event comes after
        name, allocs, warnings = agent.submit(text, fmt, body.variables, body.source, body.lines)
        submitted = job_json(name, allocs) if allocs else describe_job(agent, name)  # a registered job has none
        return models.JobSubmitted(**submitted.model_dump(), warnings=warnings, index=index)

    @api.get("/v1/jobs", response_model=models.Jobs, tags=["jobs"])
    async def jobs() -> models.Jobs:
        listed = {name: job_json(name, allocs) for name, allocs in agent.jobs().items()}
        listed |= {name: parent_json(agent, parent) for name, parent in agent.parents().items()}
        return models.Jobs(jobs=[listed[name] for name in sorted(listed)])

    # ":path": a child's name has a "/" (nightly/periodic-1700000000). A route under a job
    # (.../periodic/force) is told apart by its method, which no GET or DELETE of a job has.
    JobName = Annotated[str, Path(min_length=1, max_length=256, description="A job's name; it may contain /.")]

    api.include_router(rollouts.routes(agent))  # before the job's route, whose :path would take theirs
    api.include_router(services.routes(agent))

    @api.get("/v1/jobs/{name:path}", response_model=models.Job, tags=["jobs"])
    async def job(name: JobName) -> models.Job:
        return describe_job(agent, name)

    @api.delete("/v1/jobs/{name:path}", response_model=models.Job, tags=["jobs"],
                description="Stop the job's allocations; a periodic job launches no more and its children stop.")
    def stop_job(name: JobName) -> models.Job:
        agent.stop_job(name)
        return describe_job(agent, name)

    @api.post("/v1/jobs/{name:path}/periodic/force", response_model=models.Job, tags=["jobs"],
              description="Launch a child of the periodic job now, whatever its prohibit_overlap; "
                          "the answer is the child.")
    def force(name: JobName) -> models.Job:
        child, allocs = agent.force(name)
        return job_json(child, allocs)

    @api.post("/v1/jobs/{name:path}/dispatch", response_model=models.JobDispatched, tags=["jobs"],
              summary="Dispatch a parameterized job")
    def dispatch(name: JobName, body: models.DispatchRequest) -> models.JobDispatched:
        """Run a child of the parameterized job ``name`` with the given meta and payload
        (Nomad's ``POST /v1/job/{name}/dispatch``); nothing is dispatched when any is refused."""
        try:
            payload = base64.b64decode(body.payload, validate=True)
        except ValueError:  # binascii.Error, or a character outside ASCII
            raise ApiError(400, "payload: not base64") from None
        child, allocs = agent.dispatch(name, body.meta, payload)
        return models.JobDispatched(**job_json(child, allocs).model_dump(), parent=name)

    # -- allocations -------------------------------------------------------

    @api.get("/v1/allocations", response_model=models.Allocations, tags=["allocations"])
    async def allocations() -> models.Allocations:
        return models.Allocations(allocations=[alloc_summary(a) for a in agent.allocs()])

    @api.get("/v1/allocations/{alloc_id}", response_model=models.Allocation, tags=["allocations"])
    async def allocation(alloc_id: AllocId) -> models.Allocation:
        alloc = agent.alloc(alloc_id)
        return alloc_status(alloc, agent.health(alloc.alloc.id), agent.rescheduling(alloc))

    @api.get("/v1/events", tags=["allocations"], response_class=StreamingResponse,
             responses={200: {"content": {"text/event-stream": {"schema": _SSE_EVENT}},
                              "description": "Task events and allocations' ends as server-sent events "
                                             "(`event: task-event` or `alloc-status`, "
                                             "`id:` the event's index, `data:` the event as JSON)"}})
    async def event_stream(request: Request,
                           alloc_id: Annotated[str | None, Query(max_length=64,
                                                                 description="Only this allocation's events "
                                                                             "(an ID or a unique prefix)")] = None,
                           index: Annotated[int, Query(ge=0, description="Only events after this index")] = 0,
                           follow: bool = True,
                           ends: Annotated[bool, Query(description="Also each allocation's end, once every task "
                                                                   "of it is dead (`event: alloc-status`)")] = False
                           ) -> StreamingResponse:
        wanted = agent.alloc(alloc_id).alloc.id if alloc_id else None

        async def stream() -> AsyncIterator[str]:
            seq = index
            while True:
                last, found = events.after(seq, wanted, ends=ends)
                for kind, entry in found:
                    yield sse(kind, entry)
                seq = max(seq, last)
                if not follow or await request.is_disconnected():
                    return
                if not found:
                    yield ": keep-alive\n\n"
                await asyncio.to_thread(events.wait, seq, 5.0)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @api.get("/v1/allocations/{alloc_id}/logs/{task}", tags=["allocations"], response_class=StreamingResponse,
             responses={200: {"content": {"application/octet-stream": {"schema": {"type": "string"}}},
                              "description": "The log's bytes; `X-Herder-Log-Offset` is the offset after them"}})
    async def logs(request: Request, alloc_id: AllocId, task: Annotated[str, Path(min_length=1, max_length=256)],
                   stream: Literal["stdout", "stderr"] = "stdout",
                   offset: Annotated[int, Query(ge=0, description="Bytes into the kept files, oldest first "
                                                                  "(from the end with origin=end)")] = 0,
                   origin: Literal["start", "end"] = "start", follow: bool = False) -> StreamingResponse:
        alloc = agent.alloc(alloc_id)
        runner = agent.task(alloc, task)
        # The task's name, as the allocation has it, picks the files: nothing in the request is a path.
        tail = LogTail(app.logs_dir(alloc), runner.name, stream)
        size = tail.size()
        start = tail.seek(max(0, size - offset) if origin == "end" else offset)

        async def body() -> AsyncIterator[bytes]:
            while True:
                finished = runner.done  # read after this, so that the last output is not missed
                data = await asyncio.to_thread(tail.read, LOG_CHUNK)
                if data:
                    yield data
                    continue
                if not follow or finished or await request.is_disconnected():
                    return
                await asyncio.sleep(FOLLOW_POLL)

        return StreamingResponse(body(), media_type="application/octet-stream",
                                 headers={"X-Herder-Log-Offset": str(start), "Cache-Control": "no-cache"})

    @api.get("/v1/allocations/{alloc_id}/stats", response_model=models.AllocationStats, tags=["allocations"])
    def stats(alloc_id: AllocId) -> models.AllocationStats:
        """The resource usage of the allocation's tasks, sampled now; the CPU percent is since the previous
        request (a first request waits a moment for a second sample)."""
        alloc = agent.alloc(alloc_id)
        return alloc_stats(alloc, agent.stats(alloc))

    @api.post("/v1/allocations/{alloc_id}/exec", response_model=models.ExecResponse, tags=["allocations"])
    def exec_(alloc_id: AllocId, body: models.ExecRequest) -> models.ExecResponse:
        code, output = agent.exec(agent.alloc(alloc_id), body.task, body.command, body.timeout)
        return models.ExecResponse(exit_code=code, output=output.decode("utf-8", "replace"))

    exec_ws.register(api, agent)

    @api.post("/v1/allocations/{alloc_id}/signal", response_model=models.Done, tags=["allocations"])
    def signal(alloc_id: AllocId, body: models.SignalRequest) -> models.Done:
        tasks = agent.signal(agent.alloc(alloc_id), body.task, body.signal)
        return models.Done(message=f"{body.signal} sent to {', '.join(tasks)}")

    @api.post("/v1/allocations/{alloc_id}/restart", response_model=models.Done, tags=["allocations"])
    def restart(alloc_id: AllocId, body: models.RestartRequest) -> models.Done:
        tasks = agent.restart(agent.alloc(alloc_id), body.task, body.reason)
        return models.Done(message=f"restarting {', '.join(tasks)}")

    async def jwks(_: Request) -> JSONResponse:
        try:
            return JSONResponse(await asyncio.to_thread(agent.jwks))
        except SigningKeyError as exc:
            return _error(503, str(exc))

    # A route of Starlette's, not FastAPI's: the API's token dependency does not apply (see auth.PUBLIC_PATHS).
    api.add_route("/.well-known/jwks.json", jwks, methods=["GET", "HEAD"], include_in_schema=False)
    metrics.install(api, agent, events)
    ui.mount(api, token=token, secure=agent.config.tls.cert_file is not None)
    return api


def asgi(agent: Agent, events: EventLog) -> ASGIApp:
    """The application with its guards in front: the same site's requests only, then the token."""
    config = agent.config
    return SameSite(Guard(create_app(agent, events), config.token), Hosts.of(config, config.bind), _error)


# -- shapes ------------------------------------------------------------------


def task_summary(alloc: AllocRunner) -> dict[str, models.TaskSummary]:
    return {t.name: models.TaskSummary(state=t.status.state, failed=t.status.failed,  # type: ignore[arg-type]
                                       restarts=t.status.restarts, exit_code=t.status.exit_code)
            for t in alloc.tasks}


def alloc_summary(alloc: AllocRunner) -> models.AllocSummary:
    return models.AllocSummary(id=alloc.alloc.id, name=alloc.alloc.name, job=alloc.job.name, group=alloc.group.name,
                               status=alloc.status, tasks=task_summary(alloc))


def alloc_status(alloc: AllocRunner, health: dict[str, list[dict[str, str]]],
                 rescheduling: Rescheduling) -> models.Allocation:
    summaries = task_summary(alloc)
    tasks: dict[str, models.TaskStatus] = {}
    for runner in alloc.tasks:
        events = [event_json(_record(alloc, runner.name, event)) for event in list(runner.status.events)]
        tasks[runner.name] = models.TaskStatus(
            **summaries[runner.name].model_dump(), driver=runner.task.driver,
            events=[models.Event.model_validate(e) for e in events],
            checks=[models.Check.model_validate(c) for c in health.get(runner.name, [])])
    return models.Allocation(id=alloc.alloc.id, name=alloc.alloc.name, job=alloc.job.name, job_id=alloc.job_id,
                             group=alloc.group.name, index=alloc.alloc.index, status=alloc.status,
                             ports=[models.Port(label=p.label, value=p.value, to=p.to, host_ip=p.host_ip)
                                    for p in alloc.ports],
                             tasks=tasks, previous_allocation=rescheduling.previous,
                             next_allocation=rescheduling.next, reschedule=reschedule_json(rescheduling))


def _epoch(seconds: float) -> str:
    return rfc3339(datetime.fromtimestamp(seconds, UTC))


def reschedule_json(rescheduling: Rescheduling) -> models.Reschedule:
    return models.Reschedule(
        attempted=rescheduling.attempted, attempts=rescheduling.attempts,
        events=[models.RescheduleEvent(time=_epoch(e.time), previous=e.previous, delay=e.delay)
                for e in rescheduling.tracker],
        next_at=_epoch(rescheduling.due) if rescheduling.due is not None else None)


def alloc_stats(alloc: AllocRunner, usage: dict[str, TaskStats | None]) -> models.AllocationStats:
    tasks = {runner.name: models.TaskUsage(state=runner.status.state, driver=runner.task.driver,
                                           **(dataclasses.asdict(figures) if (figures := usage[runner.name]) else {}))
             for runner in alloc.tasks}
    return models.AllocationStats(id=alloc.alloc.id, name=alloc.alloc.name, tasks=tasks)


def _record(alloc: AllocRunner, task: str, event: TaskEvent) -> EventRecord:
    return EventRecord(alloc.alloc.id, alloc.alloc.name, task, event)


def job_json(name: str, allocs: list[AllocRunner]) -> models.Job:
    """A job run, with its allocations; :class:`NotFound` if it has none (it was collected meanwhile)."""
    if not allocs:
        raise NotFound(f"no job {name!r}")
    return models.Job(name=name, id=allocs[-1].job_id, type=allocs[-1].job.type, status=app.job_status(allocs),
                      allocations=[alloc_summary(a) for a in allocs], parent_id=allocs[-1].job.parent_id)


def describe_job(agent: Agent, name: str) -> models.Job:
    """Job ``name``, registered or run; :class:`NotFound` if there is none."""
    parent = agent.parent(name)
    return job_json(name, agent.job(name)) if parent is None else parent_json(agent, parent)


def parent_json(agent: Agent, parent: app.Parent) -> models.Job:
    """A registered job: periodic (its schedule, next launch) or parameterized, with its
    children; it has no allocations of its own."""
    periodic = parent.job.periodic
    schedule = None
    if periodic is not None:
        next_launch = agent.registry.launcher.next_launch(parent.job.name)
        last = None if parent.last_launch is None else datetime.fromtimestamp(parent.last_launch, UTC)
        schedule = models.PeriodicStatus(crons=list(periodic.crons), time_zone=periodic.time_zone,
                                         prohibit_overlap=periodic.prohibit_overlap, enabled=periodic.enabled,
                                         next_launch=None if next_launch is None else rfc3339(next_launch),
                                         last_launch=None if last is None else rfc3339(last))
    return models.Job(
        name=parent.job.name, id=parent.source.id, type=parent.job.type, status=parent.status, allocations=[],
        parameterized=parent.job.parameterized is not None, periodic=schedule,
        children=[models.ChildSummary(name=name, status=app.job_status(allocs))
                  for name, allocs in agent.children(parent.job.name).items()])
