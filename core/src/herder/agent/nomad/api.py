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
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path as FilePath
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from herder import app
from herder.agent import exec_ws
from herder.agent.api import ASGIApp, Guard, token_matches
from herder.agent.events import EventLog
from herder.agent.nomad import models
from herder.agent.nomad.ledger import SECOND, Deployment, Evaluation, Ledger
from herder.app import Agent, Conflict, NotFound
from herder.client.alloc_runner import AllocRunner
from herder.client.logtail import LogTail
from herder.errors import DispatchError, JobError, PlacementError
from herder.jobspec import evaluate_job_text
from herder.jobspec.nomad_json import to_nomad
from herder.objects import TaskEvent, TaskStats
from herder.sdk.durations import parse_duration

Body = TypeVar("Body", bound=BaseModel)

REGION = "global"
NAMESPACE = "default"
FRAME_SIZE = 64 << 10
"""The most log bytes in one frame, as Nomad's."""
HEARTBEAT = 1.0
"""Seconds between heartbeat frames of an idle log stream."""
BLOCK_POLL = 0.1
"""How often a blocking query looks again at what it waits on."""
DEFAULT_WAIT = 300.0
MAX_WAIT = 600.0
"""A blocking query's default and longest wait, Nomad's (5 and 10 minutes)."""

ALLOC_STATUS = {"pending": "pending", "running": "running", "complete": "complete", "failed": "failed",
                "stopped": "complete"}
"""herder's allocation status as Nomad's ClientStatus (a stopped allocation is complete, desired stop)."""


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"description": text, "content": {"text/plain": {"schema": {"type": "string"}}}} for status, text in (
        (400, "Invalid request (an invalid job lists each problem with its path)"),
        (403, "Missing or wrong token: Permission denied"),
        (404, "Not found (job not found, alloc not found, ...)"),
        (409, "Conflict with the current state"),
        (413, "Request body too large"),
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


class NomadError(Exception):
    """An answer in Nomad's form: a status code and a plain-text message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


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
        return PlainTextResponse("Permission denied", status_code=403)


def asgi(agent: Agent, events: EventLog, address: str) -> ASGIApp:
    """The Nomad-compatible application of ``agent`` listening at ``address`` (``host:port``), guarded."""
    return NomadGuard(create_app(agent, events, address), agent.config.token)


def create_app(agent: Agent, events: EventLog, address: str) -> FastAPI:
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
        count = len(exc.errors)
        text = f"{count} error{'s' if count != 1 else ''} occurred:\n" + "".join(f"\t* {e}\n" for e in exc.errors)
        return PlainTextResponse(text, status_code=400)

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

    async def blocking(request: Request, query: BlockingQuery, render: Callable[[], Any]) -> Response:
        """Answer ``render()`` with its index; with ``?index=N``, once the index is past N or
        ``wait`` (default 5 minutes) passed, as Nomad's blocking queries."""
        scoped(request)
        wanted, wait = query
        deadline = time.monotonic() + wait
        while True:
            index = ledger.index()
            body = render()
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

    @api.get("/v1/agent/members")
    async def members() -> Response:
        return json_answer({"ServerName": "", "ServerRegion": "", "ServerDC": "", "Members": None}, ledger.index())

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
        return await blocking(request, query, lambda: [shapes.allocation(a) for a in agent.client.allocs])

    @api.get("/v1/node/{node_id}", responses=ok(models.Node))
    async def node(request: Request, query: Blocking, node_id: Id) -> Response:
        shapes.check_node(node_id)
        return await blocking(request, query, shapes.node)

    # -- jobs ----------------------------------------------------------------------

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

    def register_job(body: models.JobRegisterRequest) -> Response:
        job = body.Job
        text = json.dumps({"Job": job})
        name, allocs, warnings = agent.submit(text, "json", {}, "nomad-api")
        evaluation_id, index = "", ledger.index()
        if agent.parent(name) is None:  # Nomad evaluates no periodic or parameterized job until it launches
            evaluation = ledger.evaluate(name, str(job.get("Type") or "service"), "job-register", allocs, job)
            evaluation_id, index = evaluation.id, evaluation.create_index
        return json_answer(models.JobRegisterResponse(EvalID=evaluation_id, EvalCreateIndex=index,
                                                      JobModifyIndex=index, Warnings="\n".join(warnings),
                                                      LastIndex=index), index)

    @api.put("/v1/jobs/parse", openapi_extra=body(models.JobParseRequest))
    @api.post("/v1/jobs/parse", openapi_extra=body(models.JobParseRequest))
    async def parse(request: Request) -> Response:
        """The job file in Nomad's JSON, as Nomad's ``/v1/jobs/parse``: evaluated without any file."""
        body = await decode(request, models.JobParseRequest)
        _, document = await asyncio.to_thread(evaluate_job_text, body.JobHCL, "hcl", "<api>", {})
        return json_answer(shapes.job_document(to_nomad(document)["Job"]), ledger.index())

    @api.get("/v1/job/{name:path}/allocations", responses=ok(list[models.AllocationListStub]))
    async def job_allocations(request: Request, query: Blocking, name: Id, all: bool = False) -> Response:
        def render() -> list[models.AllocationListStub]:
            return [shapes.alloc_stub(a) for a in shapes.allocs_of(name, request)]

        return await blocking(request, query, render)

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

    @api.get("/v1/job/{name:path}/versions", responses=ok(models.JobVersions))
    async def job_versions(request: Request, query: Blocking, name: Id) -> Response:
        shapes.allocs_of(name, request)
        return await blocking(request, query, lambda: models.JobVersions(Versions=shapes.versions(name)))

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
        """Stop the job (Nomad's ``purge`` also forgets it: herder's collector forgets a stopped job
        once its allocations are collected, so purge stops it as a stop does)."""
        scoped(request, write=True)
        stopped = agent.stop_job(name)
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
        return await blocking(request, query, lambda: [shapes.alloc_stub(a) for alloc_id in evaluation.allocs
                                                if (a := agent.client.alloc(alloc_id)) is not None])

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
        return await blocking(request, query, lambda: [shapes.alloc_stub(a) for alloc_id in found.allocs
                                                if (a := agent.client.alloc(alloc_id)) is not None])

    @api.get("/v1/deployment/{deployment_id}", responses=ok(models.Deployment))
    async def deployment(request: Request, query: Blocking, deployment_id: Id) -> Response:
        ledger.deployment(deployment_id)
        return await blocking(request, query, lambda: shapes.deployment(ledger.deployment(deployment_id)))

    # -- allocations -------------------------------------------------------------------

    @api.get("/v1/allocations", responses=ok(list[models.AllocationListStub]))
    async def allocations(request: Request, query: Blocking, prefix: Prefix = "") -> Response:
        return await blocking(request, query, lambda: [] if foreign(request) else [
            shapes.alloc_stub(a) for a in agent.client.allocs if a.alloc.id.startswith(prefix)])

    @api.get("/v1/allocation/{alloc_id}", responses=ok(models.Allocation))
    async def allocation(request: Request, query: Blocking, alloc_id: Id) -> Response:
        found = shapes.alloc(alloc_id, request)
        return await blocking(request, query, lambda: shapes.allocation(found))

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
            nonlocal position
            async for data in chunks():
                if data is None:
                    yield b"{}"
                    continue
                yield json.dumps({"Offset": position, "Data": base64.b64encode(data).decode("ascii"),
                                  "File": file, "FileEvent": ""}).encode("ascii")
                position += len(data)

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

    # `nomad alloc exec`: herder's own exec WebSocket, whose frames are Nomad's.
    exec_ws.register(api, agent, "/v1/client/allocation/{alloc_id}/exec",
                     authorized=functools.partial(carries_token, agent.config.token))
    return api


async def decode(request: Request, model: type[Body]) -> Body:
    """The request's JSON body as ``model``: Nomad's clients send JSON without saying so
    (no ``Content-Type``); an empty body is an empty object."""
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
    """``body`` as Nomad answers a read: JSON, with the index it reflects."""
    content = body.model_dump(mode="json") if isinstance(body, BaseModel) else _dump(body)
    return JSONResponse(content, headers={"X-Nomad-Index": str(index), "X-Nomad-KnownLeader": "true",
                                          "X-Nomad-LastContact": "0"})


def _dump(body: Any) -> Any:
    if isinstance(body, list):
        return [_dump(item) for item in body]
    return body.model_dump(mode="json") if isinstance(body, BaseModel) else body


BlockingQuery = tuple[int, float]
"""The index a blocking query waits to pass (0: none), and how long it may wait (seconds)."""


def blocking_query(
        index: Annotated[int, Query(ge=0, le=2**63, description="Answer once the index is past this one")] = 0,
        wait: Annotated[str, Query(max_length=32, description="The longest wait, in Nomad's duration "
                                                              "syntax (5m); at most 10m")] = "") -> BlockingQuery:
    """``index`` and ``wait`` of a blocking query, as Nomad's."""
    try:
        seconds = parse_duration(wait) if wait else DEFAULT_WAIT
    except (TypeError, ValueError):
        raise NomadError(400, f"Invalid wait time: {wait!r}") from None
    return index, min(max(seconds, 0.0), MAX_WAIT) if index else 0.0


Blocking = Annotated[BlockingQuery, Depends(blocking_query)]


def scoped(request: Request, *, write: bool = False) -> None:
    """Refuse a region other than the agent's, and a write to a namespace other than ``default``,
    as a Nomad with one region and no such namespace does."""
    region = request.query_params.get("region", "")
    if region and region != REGION:
        raise NomadError(400, "No path to region")
    if write and foreign(request):
        raise NomadError(400, f"namespace {request.query_params.get('namespace')!r} not found")


def foreign(request: Request) -> bool:
    """Whether the request asks for a namespace other than ``default`` (``*`` is every one)."""
    return request.query_params.get("namespace", NAMESPACE) not in (NAMESPACE, "*", "")


def nanoseconds(epoch: float | None) -> int:
    return 0 if epoch is None else int(epoch * SECOND)


def rfc3339(epoch: float | None) -> str:
    return models.ZERO_TIME if epoch is None else time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + \
        f".{int(epoch % 1 * 1e9):09d}Z"


class Shapes:
    """The agent's state in Nomad's shapes."""

    def __init__(self, agent: Agent, ledger: Ledger, address: str) -> None:
        self.agent = agent
        self.ledger = ledger
        self.address = address
        # A stable ID for this node: the same agent on the same data dir is the same node.
        self.node_id = str(uuid.uuid5(uuid.NAMESPACE_URL,
                                      f"herder:{agent.config.node_name}:{agent.config.data_dir}"))

    # -- the node ------------------------------------------------------------------

    def check_node(self, node_id: str) -> None:
        if node_id != self.node_id:
            raise NomadError(404, "node not found")

    def drivers(self) -> dict[str, models.DriverInfo]:
        now = rfc3339(time.time())
        return {row["name"]: models.DriverInfo(Attributes=row["attributes"], Detected=row["detected"],
                                               Healthy=row["healthy"], HealthDescription=row["description"],
                                               UpdateTime=now)
                for row in app.driver_rows(self.agent.hooks)}

    def node_stub(self) -> models.NodeListStub:
        return models.NodeListStub(**self._node_fields())

    def node(self) -> models.Node:
        drivers = self.drivers()
        attributes = dict(self.agent.client.node().attributes)
        attributes |= {f"driver.{name}": "1" for name, info in drivers.items() if info.Healthy}
        attributes |= {"nomad.version": self.agent.version, "unique.hostname": self.agent.config.node_name}
        return models.Node(**self._node_fields(drivers), HTTPAddr=self.address, Resources=self.node_resources(),
                           TLSEnabled=self.agent.config.tls.cert_file is not None,
                           Attributes=dict(sorted(attributes.items())))

    def _node_fields(self, drivers: dict[str, models.DriverInfo] | None = None) -> dict[str, Any]:
        return {"ID": self.node_id, "Name": self.agent.config.node_name,
                "Datacenter": self.agent.config.datacenter, "Address": self.address.rpartition(":")[0],
                "Version": self.agent.version, "Drivers": self.drivers() if drivers is None else drivers,
                "Status": "ready", "Drain": self.agent.draining,
                "SchedulingEligibility": "ineligible" if self.agent.draining else "eligible",
                "CreateIndex": 1, "ModifyIndex": 1}

    def node_resources(self) -> models.Resources:
        """The host's CPU (MHz: herder does not measure clock speeds, so 1000 a core, unless a
        fingerprint says ``cpu.totalcompute``), memory and the data dir's disk."""
        attributes = self.agent.client.node().attributes
        cores = int(attributes.get("cpu.numcores", "1"))
        disk = os.statvfs(self.agent.config.data_dir)
        return models.Resources(CPU=int(attributes.get("cpu.totalcompute", cores * 1000)), Cores=cores,
                                MemoryMB=int(attributes.get("memory.totalbytes", "0")) >> 20,
                                DiskMB=disk.f_blocks * disk.f_frsize >> 20)

    def host_stats(self) -> models.HostStats:
        """The host's memory, the data dir's disk and the uptime (no per-CPU figures)."""
        meminfo = {line.split(":")[0]: int(line.split()[1]) << 10
                   for line in FilePath("/proc/meminfo").read_text().splitlines() if line.split()[1:]}
        disk = os.statvfs(self.agent.config.data_dir)
        size, free = disk.f_blocks * disk.f_frsize, disk.f_bavail * disk.f_frsize
        used = size - disk.f_bfree * disk.f_frsize
        return models.HostStats(
            Memory=models.HostMemoryStats(Total=meminfo.get("MemTotal", 0), Available=meminfo.get("MemAvailable", 0),
                                          Free=meminfo.get("MemFree", 0),
                                          Used=meminfo.get("MemTotal", 0) - meminfo.get("MemAvailable", 0)),
            DiskStats=[models.HostDiskStats(Mountpoint=str(self.agent.config.data_dir), Size=size, Used=used,
                                            Available=free, UsedPercent=100.0 * used / size if size else 0.0)],
            Uptime=int(float(FilePath("/proc/uptime").read_text().split()[0])), Timestamp=time.time_ns())

    def usage(self, sampled: Mapping[str, TaskStats | None]) -> models.AllocResourceUsage:
        """The allocation's tasks' resource usage (what a driver cannot tell is 0), and their sum."""
        now = time.time_ns()
        node = self.node_resources()
        mhz = node.CPU / max(1, node.Cores)
        tasks = {name: models.TaskResourceUsage(ResourceUsage=_usage(stats, mhz), Timestamp=now)
                 for name, stats in sampled.items()}
        total = models.ResourceUsage()
        for task in tasks.values():
            total.MemoryStats.RSS += task.ResourceUsage.MemoryStats.RSS
            total.MemoryStats.Usage += task.ResourceUsage.MemoryStats.Usage
            total.CpuStats.TotalTicks += task.ResourceUsage.CpuStats.TotalTicks
            total.CpuStats.Percent += task.ResourceUsage.CpuStats.Percent
        return models.AllocResourceUsage(ResourceUsage=total, Tasks=tasks, Timestamp=now)

    def agent_self(self) -> dict[str, Any]:
        config = self.agent.config
        host, _, port = self.address.rpartition(":")
        return {
            "config": {"Region": REGION, "Datacenter": config.datacenter, "NodeName": config.node_name,
                       "Version": {"Version": self.agent.version, "VersionPrerelease": "", "VersionMetadata": ""},
                       "Client": {"Enabled": True}, "Server": {"Enabled": False}, "ACL": {"Enabled": False}},
            "member": {"Name": config.node_name, "Addr": host, "Port": int(port), "Status": "alive",
                       "Tags": {"region": REGION, "dc": config.datacenter, "build": self.agent.version}},
            "stats": {"client": {"node_id": self.node_id, "known_servers": self.address,
                                 "num_allocations": str(len(self.agent.client.allocs))}},
        }

    # -- jobs -------------------------------------------------------------------------

    def allocs_of(self, name: str, request: Request) -> list[AllocRunner]:
        """The allocations of job ``name``; 404 ``job not found`` if there is no such job."""
        if foreign(request):
            raise NomadError(404, "job not found")
        try:
            return self.agent.job(name)
        except NotFound:
            raise NomadError(404, "job not found") from None

    def document(self, name: str, job_id: str | None = None) -> dict[str, Any]:
        """Job ``name`` (its submission ``job_id``, by default the latest) in Nomad's JSON."""
        parent = self.agent.parent(name)
        if parent is not None:
            document = to_nomad(json.loads(parent.source.text))["Job"]
            periodic = document.get("Periodic")
            if isinstance(periodic, dict):  # herder's crons as Nomad's one spec (and a list, as Nomad 1.6+)
                specs = periodic.get("Specs") or [periodic.get("Spec", "")]
                document["Periodic"] = {"Enabled": periodic.get("Enabled", True), "SpecType": "cron",
                                        "Spec": specs[0], "Specs": specs,
                                        "ProhibitOverlap": periodic.get("ProhibitOverlap", False),
                                        "TimeZone": periodic.get("TimeZone") or "UTC"}
            return document
        allocs = self.agent.job(name)
        record = self.agent.client.store.job(job_id or allocs[-1].job_id)
        if record is None:
            return {"ID": name, "Name": name}
        if record.format == "json":
            submitted = json.loads(record.text)
            if isinstance(submitted, dict) and isinstance(submitted.get("Job"), dict):
                return dict(submitted["Job"])  # sent in Nomad's JSON: given back as it came
        _, document = evaluate_job_text(record.text, record.format, record.source, record.variables)
        return to_nomad(document)["Job"]

    def job_document(self, job: dict[str, Any]) -> dict[str, Any]:
        """A Nomad job with the fields a Nomad server fills in, where the job leaves them out."""
        groups = [{"Count": 1, "Tasks": [], **group} for group in job.get("TaskGroups") or []]
        name = job.get("ID") or job.get("Name") or ""
        return {"Region": REGION, "Namespace": NAMESPACE, "Type": "service", "Priority": 50, "AllAtOnce": False,
                "Datacenters": [self.agent.config.datacenter], "Stop": False, "ParentID": "", "Dispatched": False,
                "Status": "pending", "StatusDescription": "", "Stable": False, "Version": 0, "SubmitTime": 0,
                "CreateIndex": 1, "ModifyIndex": 1, "JobModifyIndex": 1,
                **{k: v for k, v in job.items() if v is not None}, "ID": name, "Name": job.get("Name") or name,
                "TaskGroups": groups}

    def job(self, name: str, job_id: str | None = None) -> dict[str, Any]:
        """Job ``name`` as ``GET /v1/job/:id`` answers."""
        allocs = self.agent.job(name)
        parent = self.agent.parent(name)
        document = self.job_document(self.document(name, job_id))
        ids = self.ledger.job_ids(name)
        job_id = job_id or (ids[-1] if ids else None)
        record = self.agent.client.store.job(job_id) if job_id else None
        index = self.ledger.index()
        document |= {"Status": self.status(name, allocs), "Stop": self.stopped(name, allocs),
                     "Version": ids.index(job_id) if job_id in ids else 0,
                     "SubmitTime": nanoseconds(record.created_at if record else None),
                     "ParentID": allocs[-1].job.parent_id or "" if allocs else "",
                     "Dispatched": bool(allocs and "/dispatch-" in name), "ModifyIndex": index,
                     "Stable": bool(allocs) and all(a.status in ("running", "complete") for a in allocs)}
        if parent is not None:
            document["ParentID"] = ""
        return document

    def status(self, name: str, allocs: list[AllocRunner]) -> str:
        """Nomad's job status: pending, running or dead."""
        parent = self.agent.parent(name)
        if parent is not None:
            return "dead" if parent.status == "stopped" else "running"
        current = app.job_status(allocs)
        if current == "running":
            return "running" if any(a.status != "pending" for a in allocs) else "pending"
        return "dead"

    def stopped(self, name: str, allocs: list[AllocRunner]) -> bool:
        parent = self.agent.parent(name)
        if parent is not None:
            return parent.status == "stopped"
        latest = [a for a in allocs if a.job_id == allocs[-1].job_id]
        return all(a.stopping or a.status == "stopped" for a in latest)

    def job_stub(self, name: str) -> models.JobListStub | None:
        try:
            allocs = self.agent.job(name)
            document = self.job(name)
        except NotFound:
            return None  # collected meanwhile
        return models.JobListStub(
            ID=name, ParentID=document["ParentID"], Name=document["Name"], Datacenters=document["Datacenters"],
            Type=document["Type"], Priority=document["Priority"], Periodic=bool(document.get("Periodic")),
            ParameterizedJob=bool(document.get("ParameterizedJob")), Stop=document["Stop"],
            Status=self.status(name, allocs), JobSummary=self.summary(name), SubmitTime=document["SubmitTime"],
            ModifyIndex=document["ModifyIndex"], JobModifyIndex=document["ModifyIndex"], CreateIndex=1)

    def summary(self, name: str) -> models.JobSummary:
        allocs = self.agent.job(name)
        groups: dict[str, models.TaskGroupSummary] = {}
        for alloc in allocs:
            group = groups.setdefault(alloc.group.name, models.TaskGroupSummary())
            status = alloc.status
            if status == "pending":
                group.Starting += 1
            elif status == "running":
                group.Running += 1
            elif status == "failed":
                group.Failed += 1
            else:
                group.Complete += 1
        children = models.JobChildrenSummary()
        for child in self.agent.children(name).values():
            state = app.job_status(child)
            if state == "running":
                children.Running += 1
            else:
                children.Dead += 1
        return models.JobSummary(JobID=name, Summary=groups, Children=children, CreateIndex=1,
                                 ModifyIndex=self.ledger.index())

    def versions(self, name: str) -> list[dict[str, Any]]:
        """Every submission of job ``name`` still known, newest first."""
        return [self.job(name, job_id) for job_id in reversed(self.ledger.job_ids(name))] or [self.job(name)]

    # -- evaluations and deployments ---------------------------------------------------

    def evaluation(self, found: Evaluation) -> models.Evaluation:
        return models.Evaluation(ID=found.id, Type=found.job_type, TriggeredBy=found.triggered_by, JobID=found.job,
                                 JobModifyIndex=found.create_index, DeploymentID=found.deployment,
                                 CreateIndex=found.create_index, ModifyIndex=found.create_index,
                                 SnapshotIndex=found.create_index, CreateTime=found.created,
                                 ModifyTime=found.created)

    def deployment(self, found: Deployment) -> models.Deployment:
        groups: dict[str, models.DeploymentState] = {}
        for name, update in found.groups.items():
            mine = [alloc_id for alloc_id in found.allocs if self._group(alloc_id) in (name, None)]
            health = [found.healthy.get(alloc_id) for alloc_id in mine]
            groups[name] = models.DeploymentState(
                AutoRevert=update.auto_revert, ProgressDeadline=int(update.progress_deadline * SECOND),
                RequireProgressBy=rfc3339(found.started + update.progress_deadline),
                DesiredTotal=found.desired.get(name, 0), PlacedAllocs=len(mine),
                HealthyAllocs=sum(h is True for h in health), UnhealthyAllocs=sum(h is False for h in health))
        return models.Deployment(ID=found.id, JobID=found.job, JobVersion=found.version,
                                 JobModifyIndex=found.create_index, JobSpecModifyIndex=found.create_index,
                                 JobCreateIndex=found.create_index, TaskGroups=groups, Status=found.status,
                                 StatusDescription=found.description, CreateIndex=found.create_index,
                                 ModifyIndex=found.modify_index)

    def _group(self, alloc_id: str) -> str | None:
        alloc = self.agent.client.alloc(alloc_id)
        return alloc.group.name if alloc is not None else None

    # -- allocations -------------------------------------------------------------------

    def alloc(self, alloc_id: str, request: Request) -> AllocRunner:
        if foreign(request):
            raise NomadError(404, "alloc not found")
        try:
            return self.agent.alloc(alloc_id)
        except NotFound:
            raise NomadError(404, "alloc not found") from None

    def alloc_stub(self, alloc: AllocRunner) -> models.AllocationListStub:
        return models.AllocationListStub(**self._alloc_fields(alloc))

    def allocation(self, alloc: AllocRunner) -> models.Allocation:
        fields = self._alloc_fields(alloc)
        deployment = self.ledger.deployment_of(alloc.alloc.id)
        try:
            job = self.job(alloc.job.name, alloc.job_id)
        except NotFound:  # the job was collected meanwhile
            job = self.job_document({"ID": alloc.job.name, "Type": alloc.job.type})
        resources = models.Resources(CPU=sum(t.task.resources.cpu for t in alloc.tasks),
                                     MemoryMB=sum(t.task.resources.memory for t in alloc.tasks))
        return models.Allocation(**fields, Job=job, Resources=resources,
                                 DeploymentID=deployment.id if deployment else "",
                                 Metrics=models.AllocationMetric(NodesAvailable={self.agent.config.datacenter: 1}),
                                 AllocModifyIndex=fields["ModifyIndex"])

    def _alloc_fields(self, alloc: AllocRunner) -> dict[str, Any]:
        created = self.ledger.created(alloc)
        deployment = self.ledger.deployment_of(alloc.alloc.id)
        health = None if deployment is None else deployment.healthy.get(alloc.alloc.id)
        index = self.ledger.index()
        states = {runner.name: self.task_state(alloc, runner.name) for runner in alloc.tasks}
        return {
            "ID": alloc.alloc.id, "EvalID": self.ledger.eval_of(alloc.alloc.id), "Name": alloc.alloc.name,
            "NodeID": self.node_id, "NodeName": self.agent.config.node_name, "JobID": alloc.job.name,
            "JobType": alloc.job.type, "JobVersion": self.ledger.version(alloc.job.name, alloc.job_id),
            "TaskGroup": alloc.group.name,
            "DesiredStatus": "stop" if alloc.stopping or alloc.status == "stopped" else "run",
            "DesiredDescription": "alloc is being stopped" if alloc.stopping else "",
            "ClientStatus": ALLOC_STATUS.get(alloc.status, alloc.status),
            "TaskStates": states,
            "DeploymentStatus": None if deployment is None else models.AllocDeploymentStatus(
                Healthy=health, ModifyIndex=deployment.modify_index),
            "CreateIndex": self.ledger.create_index(alloc.alloc.id), "ModifyIndex": index,
            "CreateTime": created, "ModifyTime": max([created, *(event.Time for task in states.values()
                                                                 for event in task.Events)]),
        }

    def task_state(self, alloc: AllocRunner, task: str) -> models.TaskState:
        runner = self.agent.task(alloc, task)
        status = runner.status
        events = [_event(event) for event in list(status.events)]
        restarts = [e.Time for e in events if e.Type == "Restarting"]
        return models.TaskState(State=status.state, Failed=status.failed, Restarts=status.restarts,
                                LastRestart=rfc3339(restarts[-1] / SECOND) if restarts else models.ZERO_TIME,
                                StartedAt=rfc3339(status.started_at), FinishedAt=rfc3339(status.finished_at),
                                Events=events)


def _usage(stats: TaskStats | None, mhz: float) -> models.ResourceUsage:
    """A task's usage as Nomad's; ``mhz`` is one core's speed."""
    if stats is None:
        return models.ResourceUsage()
    measured = [name for name, value in (("RSS", stats.memory_rss_bytes), ("Usage", stats.memory_usage_bytes))
                if value is not None]
    return models.ResourceUsage(
        MemoryStats=models.MemoryStats(RSS=stats.memory_rss_bytes or 0, Usage=stats.memory_usage_bytes or 0,
                                       MaxUsage=stats.memory_limit_bytes or 0, Measured=measured),
        # Nomad's ticks are MHz: the share of one core used, times a core's speed.
        CpuStats=models.CpuStats(Percent=stats.cpu_percent or 0.0, TotalTicks=(stats.cpu_percent or 0.0) / 100 * mhz,
                                 ThrottledPeriods=stats.cpu_throttled_periods or 0,
                                 ThrottledTime=stats.cpu_throttled_ns or 0,
                                 Measured=["Percent", "Total Ticks"] if stats.cpu_percent is not None else None))


def _event(event: TaskEvent) -> models.TaskEvent:
    details = {str(k): str(v) for k, v in (event.details or {}).items()}
    exit_code = details.get("exit_code", "0")
    signal = details.get("signal", "0")
    return models.TaskEvent(Type=event.type, Time=int(event.time.timestamp() * SECOND),
                            DisplayMessage=event.message, Message=event.message, Details=details,
                            ExitCode=int(exit_code) if exit_code.lstrip("-").isdigit() else 0,
                            Signal=int(signal) if signal.isdigit() else 0)
