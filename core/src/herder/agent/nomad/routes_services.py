"""The Nomad-compatible API's native services (Nomad 1.3): ``/v1/services`` and ``/v1/service/NAME``.

What ``nomad service list`` / ``info`` and consul-template's ``nomadService`` read: the services of
``provider = "nomad"`` (:mod:`herder.services.native`). Reads block on the registry's own index, which
every registration and deregistration raises, as Nomad's on its service registrations table.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Path, Request
from fastapi.responses import Response

from herder.agent.nomad.blocking import Blocking
from herder.agent.nomad.shapes import NomadError, foreign
from herder.app import Agent
from herder.services.native import NAMESPACE, NativeServices, Registration, choose, parse_choose

POLL = 0.1
"""How often a blocking read looks again at the registry's index."""

Answer = Callable[[Any, int], Response]
Name = Annotated[str, Path(min_length=1, max_length=256)]


def register(api: FastAPI, agent: Agent, *, answer: Answer, scoped: Callable[..., None]) -> None:
    """Add the routes to ``api``; ``answer`` makes a JSON answer at an index, ``scoped`` refuses another region."""

    async def blocking(request: Request, query: tuple[int, float], render: Callable[[NativeServices], Any]
                       ) -> Response:
        scoped(request)
        services = agent.native_services()
        if services is None:  # no services plugin: no service
            return answer([], 0)
        wanted, wait = query
        deadline = time.monotonic() + wait
        while True:
            index = services.index
            if index > wanted or time.monotonic() >= deadline or await request.is_disconnected():
                return answer(render(services), index)
            await asyncio.sleep(POLL)

    @api.get("/v1/services", responses={200: {"description": "Every native service's name and tags, by namespace"}})
    async def services(request: Request, query: Blocking) -> Response:
        def render(native: NativeServices) -> list[dict[str, Any]]:
            names = [] if foreign(request) else native.names()
            if not names:
                return []
            return [{"Namespace": NAMESPACE,
                     "Services": [{"ServiceName": name, "Tags": list(tags)} for name, tags in names]}]
        return await blocking(request, query, render)

    @api.get("/v1/service/{name}", responses={200: {"model": list[Registration]}})
    async def service(request: Request, query: Blocking, name: Name) -> Response:
        parameter = request.query_params.get("choose", "")
        try:
            chosen = parse_choose(parameter) if parameter else None
        except ValueError as exc:
            raise NomadError(400, f"failed to choose services: {exc}") from None

        def render(native: NativeServices) -> list[Registration]:
            found = [] if foreign(request) else native.registrations(name)
            return choose(found, *chosen) if chosen is not None else found
        return await blocking(request, query, render)
