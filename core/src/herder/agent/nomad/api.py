"""The routes of the Nomad-compatible API: Nomad 1.1's paths and shapes over the agent's use cases.

Errors are Nomad's: a status and a plain-text body (``job not found``), which
Nomad's API client shows as ``Unexpected response code: 404 (job not found)``.
A request the API cannot understand is a 4xx, never a 500. Reads take Nomad's
blocking-query parameters (``index``, ``wait``) and every answer says the index
it reflects (``X-Nomad-Index``).
"""

import asyncio
import base64
import functools
import hmac
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from herder import app
from herder.agent import exec_ws
from herder.agent.api import ASGIApp, Guard, token_matches
from herder.agent.auth import TOKEN_FILE_HELP
from herder.agent.events import EventLog
from herder.agent.nomad import memo, models, rollouts, routes_agent, routes_alloc, routes_jobs, routes_services
from herder.agent.nomad.blocking import Blocking, BlockingQuery, document
from herder.agent.nomad.frames import FRAME_SIZE, HEARTBEAT, HEARTBEAT_FRAME, Framer
from herder.agent.nomad.lean import Lean
from herder.agent.nomad.ledger import Ledger
from herder.agent.nomad.plan import enforce_index
from herder.agent.nomad.shapes import NAMESPACE, REGION, NomadError, Shapes, foreign, multierror
from herder.agent.samesite import Hosts, SameSite
from herder.app import Agent, Conflict, NotFound
from herder.client.feasibility import Infeasible
from herder.client.logtail import LogTail
from herder.client.signing import SigningKeyError
from herder.errors import DispatchError, JobError, PlacementError
from herder.jobspec import evaluate_job_text
from herder.jobspec.nomad_json import to_nomad

Body = TypeVar("Body", bound=BaseModel)

BLOCK_POLL = 0.1
"""How often a blocking query looks again at what it waits on."""



ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": text, "content": {"text/plain": {"schema": {"type": "string"}}}} for status, text in (
        (400, "Invalid request (an invalid job lists each problem with its path)"),
        (403, "Missing or wrong token, a request of another site or for a Host that does not name the agent: "
              "Permission denied"),
        (404, "Not found (job not found, alloc not found, ...)"),
        (409, "Conflict with the current state"),
        (413, "Request body too large"),
        (415, "A body sent as another type than JSON"),
    )}
"""Nomad's errors: a status and a plain-text message (documented for the OpenAPI document)."""


def ok(model: Any) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI description of a route's answer, ``model`` as JSON (the routes answer
    :class:`Response` with Nomad's headers, so FastAPI cannot tell it from the function)."""
    return {200: {"model": model, "description": "Nomad's answer; X-Nomad-Index is the index it reflects"}}


def body(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI description of a JSON request body: the routes read the body themselves,
    as Nomad's clients send JSON without a Content-Type."""
    return {"requestBody": {"required": False, "content": {"application/json": {"schema": model.model_json_schema()}}}}


def carries_token(token: str, headers: Mapping[bytes, bytes]) -> bool:
    """Whether ``headers`` carry ``token`` in one of Nomad's ways: ``X-Nomad-Token`` or ``Authorization: Bearer``."""
    given = headers.get(b"x-nomad-token")
    if given is not None:
        return hmac.compare_digest(given, token.encode("utf-8"))
    return token_matches(token, headers.get(b"authorization"))


class NomadGuard(Guard):
    """herder's guard (body limit, token before anything is read) with Nomad's ways of giving the
    token (:func:`carries_token`) and its refusal, 403 ``Permission denied``."""

    def authorized(self, headers: Mapping[bytes, bytes]) -> bool:
        return carries_token(self.token, headers)

    def refusal(self) -> ASGIApp:
        return PlainTextResponse(f"Permission denied: missing or wrong token (X-Nomad-Token; {TOKEN_FILE_HELP}; "
                                 "or set NOMAD_TOKEN)", status_code=403)


def asgi(agent: Agent, events: EventLog, address: str, ui_address: str) -> ASGIApp:
    """The Nomad-compatible application of ``agent`` listening at ``address`` (``host:port``; its main
    listener, with the web UI, at ``ui_address``), guarded as herder's: the same site's requests only
    (whose JSON Nomad's clients send without a Content-Type), then the token."""
    guarded = NomadGuard(create_app(agent, events, address, ui_address), agent.config.token)

    async def front(scope: Scope, receive: Receive, send: Send) -> None:
        # Nomad's root is its web UI (``nomad ui`` without a job opens it), here as its /ui/ redirect.
        if scope["type"] == "http" and scope["path"] == "/" and scope["method"] in ("GET", "HEAD"):
            await RedirectResponse("/ui/", status_code=307)(scope, receive, send)
            return
        await guarded(scope, receive, send)

    return SameSite(front, Hosts.of(agent.config, address), refuse, untyped_json=True)


def refuse(status: int, message: str) -> Response:
    """A request :class:`SameSite` refuses, answered as Nomad answers a refusal: plain text."""
    return PlainTextResponse(f"Permission denied: {message}" if status == 403 else message, status_code=status)


def create_app(agent: Agent, events: EventLog, address: str, ui_address: str) -> Lean:
    """The routes, the reads polled most answered by their lean path (:mod:`.lean`), the rest by FastAPI."""
    ledger = Ledger(agent, events)
    shapes = Shapes(agent, ledger, address)
    api = FastAPI(title="herder agent: Nomad-compatible API", version=agent.version, responses=ERRORS,
                  openapi_url="/v1/nomad-openapi.json", docs_url=None, redoc_url=None)

    @api.exception_handler(NomadError)
    async def nomad_error(_: Request, exc: NomadError) -> Response:
        return PlainTextResponse(exc.message, status_code=exc.status)

    @api.exception_handler(NotFound)
    async def not_found(_: Request, exc: NotFound) -> Response:
        return PlainTextResponse(str(exc), status_code=404)

    @api.exception_handler(Conflict)
    async def conflict(_: Request, exc: Conflict) -> Response:
        return PlainTextResponse(str(exc), status_code=409)

    @api.exception_handler(JobError)
    @api.exception_handler(DispatchError)
    async def invalid(_: Request, exc: JobError | DispatchError) -> Response:
        return PlainTextResponse(multierror(exc.errors), status_code=400)

    @api.exception_handler(PlacementError)
    async def unplaced(_: Request, exc: PlacementError) -> Response:
        return PlainTextResponse(str(exc), status_code=409)

    @api.exception_handler(RequestValidationError)
    async def malformed(_: Request, exc: RequestValidationError) -> Response:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        return PlainTextResponse(f"Failed to decode request: {problems}", status_code=400)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Response:
        # Go's mux answers an unknown path so; a Nomad without the feature answers as it does.
        return PlainTextResponse("404 page not found" if exc.status_code == 404 else str(exc.detail),
                                 status_code=exc.status_code)

    Id = Annotated[str, Path(min_length=1, max_length=256)]
    Prefix = Annotated[str, Query(max_length=256)]

    async def blocking(request: Request, query: BlockingQuery, render: Callable[[], Any], *,
                       kept: bool = False) -> Response:
        """Answer ``render()`` with its index; with ``?index=N``, once the index is past N or
        ``wait`` (default 5 minutes) passed, as Nomad's blocking queries. A render reads in the thread pool
        (a job shown may be read again: never on the loop), unless it is ``kept``: made of the allocations'
        kept shapes (:mod:`.memo`), it is tried on the loop first."""
        scoped(request)
        wanted, wait = query
        deadline = time.monotonic() + wait
        while True:
            index = ledger.index()
            body = memo.on_loop(render) if kept else None
            if body is None:
                body = await asyncio.to_thread(render)
            if index > wanted or time.monotonic() >= deadline or await request.is_disconnected():
                return json_answer(body, index)
            await asyncio.sleep(BLOCK_POLL)

    # -- the agent, the region, the node ----------------------------------------

    @api.get("/v1/agent/self")
    async def agent_self() -> Response:
        return json_answer(shapes.agent_self(), ledger.index())

    @api.get("/v1/agent/health")
    async def agent_health() -> Response:
        return json_answer({"client": {"ok": True, "message": "ok"}}, ledger.index())

    @api.get("/.well-known/jwks.json", include_in_schema=False)
    async def jwks() -> Response:
        """Served without the token, as Nomad's (:data:`herder.agent.auth.PUBLIC_PATHS`)."""
        try:
            return JSONResponse(await asyncio.to_thread(agent.jwks))
        except SigningKeyError as exc:
            raise NomadError(503, str(exc)) from None

    @api.get("/v1/status/leader", responses=ok(str))
    async def leader() -> Response:
        return json_answer(address, ledger.index())

    @api.get("/v1/status/peers", responses=ok(list[str]))
    async def peers() -> Response:
        return json_answer([address], ledger.index())

    @api.get("/v1/regions", responses=ok(list[str]))
    async def regions() -> Response:
        return json_answer([REGION], ledger.index())

    @api.get("/v1/nodes", responses=ok(list[models.NodeListStub]))
    async def nodes(request: Request, query: Blocking, prefix: Prefix = "") -> Response:
        return await blocking(request, query, lambda: [shapes.node_stub()] if shapes.node_id.startswith(prefix) else [])

    @api.get("/v1/node/{node_id}/allocations", responses=ok(list[models.Allocation]))
    async def node_allocations(request: Request, query: Blocking, node_id: Id) -> Response:
        shapes.check_node(node_id)
        return await blocking(request, query, lambda: [shapes.allocation(a) for a in agent.allocs()], kept=True)

    @api.get("/v1/node/{node_id}", responses=ok(models.Node))
    async def node(request: Request, query: Blocking, node_id: Id) -> Response:
        shapes.check_node(node_id)
        return await blocking(request, query, shapes.node)

    routes_agent.register(api, agent, events, ledger, shapes, answer=json_answer, decode=decode,
                          ui_address=ui_address)
    routes_services.register(api, agent, answer=json_answer, scoped=scoped)

    # -- jobs ----------------------------------------------------------------------

    # Before the routes of /v1/job/{name}, which would take .../plan for a job's name.
    routes_jobs.register(api, agent, ledger, shapes, answer=json_answer, decode=decode)
    rollouts.register(api, agent, ledger, shapes, answer=json_answer, decode=decode, scoped=scoped)

    @api.get("/v1/jobs", responses=ok(list[models.JobListStub]))
    async def jobs(request: Request, query: Blocking, prefix: Prefix = "") -> Response:
        def render() -> list[models.JobListStub]:
            if foreign(request):
                return []
            names = sorted(set(agent.jobs()) | set(agent.parents()))
            return [stub for name in names if name.startswith(prefix) and (stub := shapes.job_stub(name))]

        return await blocking(request, query, render)

    @api.put("/v1/jobs", responses=ok(models.JobRegisterResponse), openapi_extra=body(models.JobRegisterRequest))
    @api.post("/v1/jobs", openapi_extra=body(models.JobRegisterRequest))
    async def register(request: Request) -> Response:
        scoped(request, write=True)
        body = await decode(request, models.JobRegisterRequest)
        return await asyncio.to_thread(register_job, body)

    enforced = threading.Lock()

    def register_job(body: models.JobRegisterRequest) -> Response:
        job = body.Job
        try:
            if body.EnforceIndex:  # nomad job run -check-index
                # The check and the registration it allows are one step, as in Nomad's state store: checked
                # apart, two runs with the same index both passed while the first still parsed, and the
                # second replaced the first's job unseen, which -check-index is there to prevent.
                with enforced:
                    enforce_index(shapes.job_modify_index(str(job.get("ID") or job.get("Name") or "")),
                                  body.JobModifyIndex)
                    name, allocs, warnings = agent.submit(shapes.given(job), "json", {}, "nomad-api")
            else:
                name, allocs, warnings = agent.submit(shapes.given(job), "json", {}, "nomad-api")
        except Infeasible as exc:
            # As Nomad's scheduler: an evaluation that placed nothing, saying why, for the command line's
            # monitor to print (herder keeps no job it cannot place: nothing waits for the node to change).
            evaluation = ledger.evaluate(exc.job, str(job.get("Type") or "service"), "job-register", [],
                                         failed=exc.unplaced)
            return json_answer(models.JobRegisterResponse(EvalID=evaluation.id, EvalCreateIndex=evaluation.create_index,
                                                          JobModifyIndex=evaluation.create_index,
                                                          LastIndex=evaluation.create_index), evaluation.create_index)
        evaluation_id, index = "", ledger.index()
        if agent.parent(name) is None:  # Nomad evaluates no periodic or parameterized job until it launches
            evaluation = ledger.evaluate(name, str(job.get("Type") or "service"), "job-register", allocs)
            evaluation_id, index = evaluation.id, evaluation.create_index
        return json_answer(models.JobRegisterResponse(EvalID=evaluation_id, EvalCreateIndex=index,
                                                      JobModifyIndex=shapes.job_modify_index(name) or index,
                                                      Warnings="\n".join(warnings),
                                                      LastIndex=index), index)

    @api.put("/v1/validate/job", responses=ok(models.JobValidateResponse),
             openapi_extra=body(models.JobValidateRequest))
    @api.post("/v1/validate/job", openapi_extra=body(models.JobValidateRequest))
    async def validate(request: Request) -> Response:
        """Check a job as a registration does and run nothing (``nomad job validate``)."""
        scoped(request)
        body = await decode(request, models.JobValidateRequest)
        return json_answer(await asyncio.to_thread(shapes.validation, body.Job), ledger.index())

    @api.put("/v1/jobs/parse", openapi_extra=body(models.JobParseRequest))
    @api.post("/v1/jobs/parse", openapi_extra=body(models.JobParseRequest))
    async def parse(request: Request) -> Response:
        """The job file in Nomad's JSON, as Nomad's ``/v1/jobs/parse``: evaluated without any file."""
        body = await decode(request, models.JobParseRequest)
        _, document = await asyncio.to_thread(evaluate_job_text, body.JobHCL, "hcl", "<api>", {})
        return json_answer(shapes.job_document(to_nomad(document)["Job"]), ledger.index())

    @api.get("/v1/job/{name:path}/allocations", responses=ok(list[models.AllocationListStub]))
    async def job_allocations(request: Request, query: Blocking, name: Id, all: bool = False) -> Response:
        def render() -> list[memo.Encoded]:
            return [shapes.alloc_stub(a) for a in shapes.allocs_of(name, request)]

        return await blocking(request, query, render, kept=True)

    @api.get("/v1/job/{name:path}/evaluations", responses=ok(list[models.Evaluation]))
    async def job_evaluations(request: Request, query: Blocking, name: Id) -> Response:
        shapes.allocs_of(name, request)
        return await blocking(request, query, lambda: [shapes.evaluation(e) for e in ledger.evaluations(name)])

    @api.get("/v1/job/{name:path}/deployments", responses=ok(list[models.Deployment]))
    async def job_deployments(request: Request, query: Blocking, name: Id) -> Response:
        shapes.allocs_of(name, request)
        return await blocking(request, query, lambda: [shapes.deployment(d) for d in ledger.deployments(name)])

    @api.get("/v1/job/{name:path}/deployment", responses=ok(models.Deployment | None))
    async def job_deployment(request: Request, query: Blocking, name: Id) -> Response:
        shapes.allocs_of(name, request)

        def render() -> models.Deployment | None:
            latest = ledger.deployments(name)
            return shapes.deployment(latest[0]) if latest else None

        return await blocking(request, query, render)

    @api.get("/v1/job/{name:path}/summary", responses=ok(models.JobSummary))
    async def job_summary(request: Request, query: Blocking, name: Id) -> Response:
        shapes.allocs_of(name, request)
        return await blocking(request, query, lambda: shapes.summary(name))

    @api.put("/v1/job/{name:path}/dispatch", responses=ok(models.JobDispatchResponse),
             openapi_extra=body(models.JobDispatchRequest))
    @api.post("/v1/job/{name:path}/dispatch", openapi_extra=body(models.JobDispatchRequest))
    async def dispatch(request: Request, name: Id) -> Response:
        scoped(request, write=True)
        body = await decode(request, models.JobDispatchRequest)
        try:
            payload = base64.b64decode(body.Payload or "", validate=True)
        except ValueError:
            raise NomadError(400, "Payload: not base64") from None
        child, allocs = await asyncio.to_thread(agent.dispatch, name, body.Meta or {}, payload)
        evaluation = ledger.evaluate(child, allocs[0].job.type if allocs else "batch", "job-register", allocs)
        return json_answer(models.JobDispatchResponse(
            DispatchedJobID=child, EvalID=evaluation.id, EvalCreateIndex=evaluation.create_index,
            JobCreateIndex=evaluation.create_index, LastIndex=evaluation.create_index), evaluation.create_index)

    @api.put("/v1/job/{name:path}/periodic/force", responses=ok(models.PeriodicForceResponse))
    @api.post("/v1/job/{name:path}/periodic/force")
    def force(request: Request, name: Id) -> Response:
        scoped(request, write=True)
        child, allocs = agent.force(name)
        evaluation = ledger.evaluate(child, allocs[0].job.type if allocs else "batch", "periodic-job", allocs)
        return json_answer(models.PeriodicForceResponse(
            EvalID=evaluation.id, EvalCreateIndex=evaluation.create_index, LastIndex=evaluation.create_index),
            evaluation.create_index)

    @api.get("/v1/job/{name:path}")
    async def job(request: Request, query: Blocking, name: Id) -> Response:
        shapes.allocs_of(name, request)
        return await blocking(request, query, lambda: shapes.job(name))

    @api.put("/v1/job/{name:path}", responses=ok(models.JobRegisterResponse),
             openapi_extra=body(models.JobRegisterRequest))
    @api.post("/v1/job/{name:path}", openapi_extra=body(models.JobRegisterRequest))
    async def register_one(request: Request, name: Id) -> Response:
        scoped(request, write=True)
        body = await decode(request, models.JobRegisterRequest)
        if body.Job.get("ID") != name:
            raise NomadError(400, "Job ID does not match name")
        return await asyncio.to_thread(register_job, body)

    @api.delete("/v1/job/{name:path}", responses=ok(models.JobDeregisterResponse))
    def deregister(request: Request, name: Id, purge: bool = False) -> Response:
        """Stop the job; with ``purge``, forget it too: it is listed no more, and its allocations are
        collected once stopped."""
        scoped(request, write=True)
        stopped = agent.purge_job(name) if purge else agent.stop_job(name)
        job_type = stopped[0].job.type if stopped else "service"
        evaluation = ledger.evaluate(name, job_type, "job-deregister", stopped)
        return json_answer(models.JobDeregisterResponse(
            EvalID=evaluation.id, EvalCreateIndex=evaluation.create_index,
            JobModifyIndex=evaluation.create_index, LastIndex=evaluation.create_index), evaluation.create_index)

    # -- evaluations and deployments --------------------------------------------------

    @api.get("/v1/evaluations", responses=ok(list[models.Evaluation]))
    async def evaluations(request: Request, query: Blocking, prefix: Prefix = "") -> Response:
        return await blocking(request, query, lambda: [] if foreign(request) else [
            shapes.evaluation(e) for e in ledger.evaluations() if e.id.startswith(prefix)])

    @api.get("/v1/evaluation/{eval_id}/allocations", responses=ok(list[models.AllocationListStub]))
    async def evaluation_allocations(request: Request, query: Blocking, eval_id: Id) -> Response:
        evaluation = ledger.evaluation(eval_id)
        return await blocking(request, query, lambda: shapes.alloc_stubs(evaluation.allocs), kept=True)

    @api.get("/v1/evaluation/{eval_id}", responses=ok(models.Evaluation))
    async def evaluation(request: Request, query: Blocking, eval_id: Id) -> Response:
        found = ledger.evaluation(eval_id)
        return await blocking(request, query, lambda: shapes.evaluation(found))

    @api.get("/v1/deployments", responses=ok(list[models.Deployment]))
    async def deployments(request: Request, query: Blocking, prefix: Prefix = "") -> Response:
        return await blocking(request, query, lambda: [] if foreign(request) else [
            shapes.deployment(d) for d in ledger.deployments() if d.id.startswith(prefix)])

    @api.get("/v1/deployment/allocations/{deployment_id}", responses=ok(list[models.AllocationListStub]))
    async def deployment_allocations(request: Request, query: Blocking, deployment_id: Id) -> Response:
        found = ledger.deployment(deployment_id)
        return await blocking(request, query, lambda: shapes.alloc_stubs(found.allocs), kept=True)

    @api.get("/v1/deployment/{deployment_id}", responses=ok(models.Deployment))
    async def deployment(request: Request, query: Blocking, deployment_id: Id) -> Response:
        ledger.deployment(deployment_id)
        return await blocking(request, query, lambda: shapes.deployment(ledger.deployment(deployment_id)))

    # -- allocations -------------------------------------------------------------------

    @api.get("/v1/allocations", responses=ok(list[models.AllocationListStub]))
    async def allocations(request: Request, query: Blocking, prefix: Prefix = "") -> Response:
        return await blocking(request, query, lambda: [] if foreign(request) else [
            shapes.alloc_stub(a) for a in app.matching(prefix, agent.allocs())], kept=True)

    @api.get("/v1/allocation/{alloc_id}", responses=ok(models.Allocation))
    async def allocation(request: Request, query: Blocking, alloc_id: Id) -> Response:
        found = shapes.alloc(alloc_id, request)
        return await blocking(request, query, lambda: shapes.allocation(found), kept=True)

    @api.put("/v1/client/allocation/{alloc_id}/signal", openapi_extra=body(models.AllocSignalRequest))
    @api.post("/v1/client/allocation/{alloc_id}/signal", openapi_extra=body(models.AllocSignalRequest))
    async def signal(request: Request, alloc_id: Id) -> Response:
        body = await decode(request, models.AllocSignalRequest)
        agent.signal(shapes.alloc(alloc_id, request), body.Task or None, body.Signal or "SIGKILL")
        return json_answer({}, ledger.index())

    @api.put("/v1/client/allocation/{alloc_id}/restart", openapi_extra=body(models.AllocRestartRequest))
    @api.post("/v1/client/allocation/{alloc_id}/restart", openapi_extra=body(models.AllocRestartRequest))
    async def restart(request: Request, alloc_id: Id) -> Response:
        body = await decode(request, models.AllocRestartRequest)
        agent.restart(shapes.alloc(alloc_id, request), None if body.AllTasks else body.TaskName or None,
                      "Restart requested through Nomad's API")
        return json_answer({}, ledger.index())

    @api.get("/v1/client/allocation/{alloc_id}/stats", responses=ok(models.AllocResourceUsage))
    def allocation_stats(request: Request, alloc_id: Id) -> Response:
        alloc = shapes.alloc(alloc_id, request)
        return json_answer(shapes.usage(agent.stats(alloc)), ledger.index())

    @api.get("/v1/client/stats", responses=ok(models.HostStats))
    async def host_stats() -> Response:
        return json_answer(shapes.host_stats(), ledger.index())

    @api.get("/v1/client/fs/logs/{alloc_id}")
    async def logs(request: Request, alloc_id: Id, task: Annotated[str, Query(min_length=1, max_length=256)],
                   type: Annotated[str, Query(pattern="^(stdout|stderr)$")] = "stdout",
                   origin: Annotated[str, Query(pattern="^(start|end)$")] = "start",
                   offset: Annotated[int, Query(ge=0)] = 0, follow: bool = False, plain: bool = False) -> Response:
        alloc = shapes.alloc(alloc_id, request)
        runner = agent.task(alloc, task)
        # The task's name, as the allocation has it, picks the files: nothing in the request is a path.
        tail = LogTail(app.logs_dir(alloc), runner.name, type)
        position = tail.seek(max(0, tail.size() - offset) if origin == "end" else offset)
        file = f"alloc/logs/{runner.name}.{type}.0"

        async def chunks() -> AsyncIterator[bytes | None]:
            """The log's bytes as they come; None when a heartbeat is due."""
            idle = 0.0
            while True:
                finished = runner.done  # read before, so that the last output is not missed
                data = await asyncio.to_thread(tail.read, FRAME_SIZE)
                if data:
                    idle = 0.0
                    yield data
                    continue
                if not follow or finished or await request.is_disconnected():
                    return
                await asyncio.sleep(BLOCK_POLL)
                idle += BLOCK_POLL
                if idle >= HEARTBEAT:
                    idle = 0.0
                    yield None

        async def frames() -> AsyncIterator[bytes]:
            framer = Framer(file, position)
            async for data in chunks():
                yield HEARTBEAT_FRAME if data is None else framer.data(data)

        async def raw() -> AsyncIterator[bytes]:
            async for data in chunks():
                if data is not None:
                    yield data

        if plain:
            return StreamingResponse(raw(), media_type="text/plain")
        return StreamingResponse(frames(), media_type="application/json")

    # -- what a Nomad without the feature answers ---------------------------------------

    @api.get("/v1/namespaces")
    async def namespaces() -> Response:
        return json_answer([{"Name": NAMESPACE, "Description": "Default shared namespace", "Quota": "",
                             "Meta": None, "CreateIndex": 1, "ModifyIndex": 1}], ledger.index())

    @api.get("/v1/namespace/{name}")
    async def namespace(name: Id) -> Response:
        if name != NAMESPACE:
            raise NomadError(404, "Namespace not found")
        return json_answer({"Name": NAMESPACE, "Description": "Default shared namespace", "Quota": "",
                            "Meta": None, "CreateIndex": 1, "ModifyIndex": 1}, ledger.index())

    # Not served, so not in the document of the served subset: answered as Nomad's open-source edition
    # without ACLs answers (400), and its Enterprise endpoints (501 Not Implemented, as Nomad's).
    @api.api_route("/v1/acl/{rest:path}", methods=["GET", "PUT", "POST", "DELETE"], include_in_schema=False)
    async def acl(rest: str) -> Response:
        raise NomadError(400, "ACL support disabled")

    @api.get("/v1/volumes")
    @api.get("/v1/plugins")
    async def csi(request: Request, query: Blocking) -> Response:
        return await blocking(request, query, list)

    @api.get("/v1/volume/csi/{volume:path}")
    async def volume(volume: str) -> Response:
        raise NomadError(404, "volume not found")

    @api.get("/v1/plugin/csi/{plugin:path}")
    async def plugin(plugin: str) -> Response:
        raise NomadError(404, "plugin not found")

    @api.api_route("/v1/quota{rest:path}", methods=["GET", "PUT", "POST", "DELETE"], include_in_schema=False)
    @api.api_route("/v1/sentinel/{rest:path}", methods=["GET", "PUT", "POST", "DELETE"], include_in_schema=False)
    @api.api_route("/v1/recommendation{rest:path}", methods=["GET", "PUT", "POST", "DELETE"],
                   include_in_schema=False)
    async def enterprise(rest: str) -> Response:
        raise NomadError(501, "Nomad Enterprise only endpoint")

    # `nomad alloc fs` and `nomad alloc stop`.
    routes_alloc.register(api, agent, shapes, ledger, json_answer, scoped)

    # `nomad alloc exec`: herder's own exec WebSocket, whose frames are Nomad's.
    exec_ws.register(api, agent, "/v1/client/allocation/{alloc_id}/exec",
                     authorized=functools.partial(carries_token, agent.config.token), error=refuse)
    document(api)
    return Lean(api, [allocations, allocation, job_allocations, jobs, job, job_summary, node_allocations])


async def decode(request: Request, model: type[Body]) -> Body:
    """The request's JSON body as ``model``: Nomad's clients send JSON without saying so
    (no ``Content-Type``; a body of another type was refused in front, :mod:`herder.agent.samesite`);
    an empty body is an empty object."""
    raw = await request.body()
    try:
        return model.model_validate(json.loads(raw) if raw.strip() else {})
    except RecursionError:
        raise NomadError(400, "Failed to decode request: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError and ValidationError are ValueErrors
        problems = exc.errors() if isinstance(exc, ValidationError) else None
        text = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in problems) \
            if problems else str(exc)
        raise NomadError(400, f"Failed to decode request: {text}") from None


def json_answer(body: Any, index: int) -> Response:
    """``body`` as Nomad answers a read: JSON (:func:`.memo.encode`), with the index it reflects."""
    return Response(memo.encode(body), media_type="application/json",
                    headers={"X-Nomad-Index": str(index), "X-Nomad-KnownLeader": "true", "X-Nomad-LastContact": "0"})


def scoped(request: Request, *, write: bool = False) -> None:
    """Refuse a region other than the agent's, and a write to a namespace other than ``default``,
    as a Nomad with one region and no such namespace does."""
    region = request.query_params.get("region", "")
    if region and region != REGION:
        raise NomadError(400, "No path to region")
    if write and foreign(request):
        raise NomadError(400, f"namespace {request.query_params.get('namespace')!r} not found")
