"""The parameters of Nomad's blocking queries (``?index=N&wait=5m``), which every read takes.

They are read from the query string by :func:`blocking_query`, not declared as FastAPI parameters: FastAPI
would validate each one of every read, a dependency of its own, as much time as a small read takes to answer.
:func:`document` puts them back in the OpenAPI document of each route that takes them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.routing import APIRoute

from herder.agent.nomad.shapes import NomadError
from herder.sdk.durations import parse_duration

DEFAULT_WAIT = 300.0
MAX_WAIT = 600.0
"""A blocking query's default and longest wait, Nomad's (5 and 10 minutes)."""
MAX_INDEX = 2**63
MAX_WAIT_LENGTH = 32

BlockingQuery = tuple[int, float]
"""The index a blocking query waits to pass (0: none), and how long it may wait (seconds)."""

PARAMETERS: list[dict[str, Any]] = [
    {"name": "index", "in": "query", "required": False, "description": "Answer once the index is past this one",
     "schema": {"type": "integer", "minimum": 0, "maximum": MAX_INDEX, "default": 0}},
    {"name": "wait", "in": "query", "required": False,
     "description": "The longest wait, in Nomad's duration syntax (5m); at most 10m",
     "schema": {"type": "string", "maxLength": MAX_WAIT_LENGTH, "default": ""}},
]
"""The parameters as the OpenAPI document describes them."""


async def blocking_query(request: Request) -> BlockingQuery:
    """``index`` and ``wait`` of a blocking query, as Nomad's. A coroutine, as it never blocks: FastAPI runs a
    plain function's dependency in the thread pool, a round trip through it for every read.

    :raises NomadError: 400, naming the parameter, as FastAPI's validation would.
    """
    given, wait = request.query_params.get("index") or "0", request.query_params.get("wait") or ""
    if not (given.isascii() and given.isdigit()):
        raise NomadError(400, "Failed to decode request: query.index: Input should be a valid integer")
    index = int(given)
    if index > MAX_INDEX:
        raise NomadError(400, f"Failed to decode request: query.index: Input should be less than or equal to "
                              f"{MAX_INDEX}")
    if len(wait) > MAX_WAIT_LENGTH:
        raise NomadError(400, f"Failed to decode request: query.wait: String should have at most "
                              f"{MAX_WAIT_LENGTH} characters")
    try:
        seconds = parse_duration(wait) if wait else DEFAULT_WAIT
    except (TypeError, ValueError):
        raise NomadError(400, f"Invalid wait time: {wait!r}") from None
    return index, min(max(seconds, 0.0), MAX_WAIT) if index else 0.0


Blocking = Annotated[BlockingQuery, Depends(blocking_query)]


def document(api: FastAPI) -> None:
    """Make ``api``'s OpenAPI document list the blocking query's parameters for each route that takes them."""
    generate = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is not None:
            return api.openapi_schema
        schema = generate()
        for route in api.routes:
            if isinstance(route, APIRoute) and route.include_in_schema and any(
                    dependency.call is blocking_query for dependency in route.dependant.dependencies):
                for method in route.methods or ():
                    operation = schema["paths"][route.path_format][method.lower()]
                    operation["parameters"] = [*PARAMETERS, *operation.get("parameters", [])]
        return schema

    api.openapi = openapi  # type: ignore[method-assign]
