"""The reads answered by the lean path (herder.agent.nomad.lean) answer as FastAPI's routes do, byte for byte.

A read with ``?index=0`` (a blocking query that waits for nothing, the same answer as without it) goes on to
FastAPI; without, the lean path answers: the two are compared, status, headers and body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import httpx
import pytest
from fastapi import FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import PlainTextResponse, Response
from starlette.types import Message, Scope

from herder.agent.nomad.blocking import Blocking
from herder.agent.nomad.lean import Lean
from herder.agent.nomad.shapes import NomadError
from tests.core.nomad_api.conftest import NomadAgent
from tests.core.nomad_api.test_cli import running_alloc, service, stop


def answer(http: httpx.Client, path: str, params: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
    response = http.get(path, params=params)
    return response.status_code, [(k, v) for k, v in response.headers.multi_items() if k != "date"], response.content


@pytest.mark.slow
def test_the_lean_path_answers_as_fastapi(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    run = nomad_agent.nomad("job", "run", str(service(tmp_path, "lean")))
    assert run.returncode == 0, run.stdout + run.stderr
    alloc = running_alloc(nomad_agent, "lean")
    node = nomad_agent.get("/v1/nodes")[0]["ID"]
    try:
        cases: list[tuple[str, dict[str, str]]] = [
            (path, params)
            for path in ("/v1/allocations", "/v1/jobs", "/v1/job/lean/allocations", "/v1/job/lean",
                         "/v1/job/lean/summary", f"/v1/allocation/{alloc}", f"/v1/node/{node}/allocations")
            for params in ({}, {"prefix": alloc[:4]}, {"prefix": "x" * 300}, {"namespace": "other"},
                           {"namespace": "default", "region": "global"}, {"region": "elsewhere"},
                           {"wait": "soon"}, {"all": "maybe"}, {"all": "true"})
        ] + [
            ("/v1/job/missing/allocations", {}), ("/v1/job/missing", {}), ("/v1/job/missing/summary", {}),
            ("/v1/allocation/missing", {}), ("/v1/node/missing/allocations", {}),
            ("/v1/job//allocations", {}), (f"/v1/job/{'x' * 300}/allocations", {}),
            ("/v1/job/a/b/allocations", {}), ("/v1/job/lean/plan", {}), ("/v1/job/lean/versions", {}),
        ]
        seen: set[int] = set()
        for token in (None, "wrong", ""):
            with nomad_agent.nomad_http(token) as http:
                for path, params in cases:
                    for _ in range(5):  # again if the agent's index moved between the two reads
                        lean = answer(http, path, params)
                        fastapi = answer(http, path, {**params, "index": "0"})
                        if lean == fastapi:
                            break
                    assert lean == fastapi, (path, params, token)
                    seen.add(lean[0])
        assert {200, 400, 403, 404} <= seen
    finally:
        stop(nomad_agent, "lean")


def test_the_lean_path_answers_its_routes_and_leaves_the_rest_to_fastapi() -> None:
    api = FastAPI()
    reached: list[str] = []

    @api.middleware("http")
    async def count(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        reached.append(request.url.path)
        return await call_next(request)

    @api.exception_handler(NomadError)
    async def refused(_: Request, exc: NomadError) -> Response:
        return PlainTextResponse(exc.message, status_code=exc.status)

    @api.get("/v1/thing/special")
    async def special(request: Request, query: Blocking) -> Response:
        return PlainTextResponse("special")

    @api.get("/v1/thing/{name:path}")
    async def thing(request: Request, query: Blocking, name: Annotated[str, PathParam(min_length=1, max_length=8)],
                    prefix: Annotated[str, Query(max_length=4)] = "", all: bool = False) -> Response:
        if name == "missing":
            raise NomadError(404, "thing not found")
        return PlainTextResponse(f"{name} {prefix} {all} {query}")

    lean = Lean(api, [thing])

    def get(target: str) -> tuple[int, bytes]:
        path, _, query = target.partition("?")
        scope: Scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "root_path": "",
                        "query_string": query.encode(), "headers": [], "http_version": "1.1", "scheme": "http",
                        "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1)}
        sent: list[Message] = []

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Message) -> None:
            sent.append(message)

        asyncio.run(lean(scope, receive, send))
        return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])

    assert get("/v1/thing/a/b?prefix=ab") == (200, b"a/b ab False (0, 0.0)") and reached == []
    assert get("/v1/thing/missing") == (404, b"thing not found") and reached == []
    assert get("/v1/thing/a?wait=soon") == (400, b"Invalid wait time: 'soon'") and reached == []
    for path in ("/v1/thing/special", "/v1/thing/a?index=1", "/v1/thing/a?all=true", "/v1/thing/a?prefix=abcde",
                 "/v1/thing/toolongname"):
        reached.clear()
        get(path)
        assert reached == [path.partition("?")[0]], path
    assert get("/v1/thing/a?index=1&wait=1ms")[0] == 200
