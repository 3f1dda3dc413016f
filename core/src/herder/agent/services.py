"""The routes of the native services: ``herder service list`` and ``herder service info``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from herder.agent import models
from herder.app import Agent, NotFound

ServiceName = Annotated[str, Path(min_length=1, max_length=256, description="A service's name; it may contain /.")]


def routes(agent: Agent) -> APIRouter:
    """The routes, over ``agent``'s embedded registry."""
    api = APIRouter()

    @api.get("/v1/services", response_model=models.Services, tags=["services"])
    async def services() -> models.Services:
        native = agent.native_services()
        names = native.names() if native is not None else []
        return models.Services(services=[models.ServiceStub(name=name, tags=list(tags)) for name, tags in names])

    @api.get("/v1/services/{name:path}", response_model=models.Service, tags=["services"])
    async def service(name: ServiceName) -> models.Service:
        native = agent.native_services()
        found = native.registrations(name) if native is not None else []
        if not found:
            raise NotFound(f"service {name} not found")
        return models.Service(name=name, instances=[models.ServiceInstance(
            id=r.ID, job=r.JobID, alloc_id=r.AllocID, address=r.Address, port=r.Port, tags=list(r.Tags))
            for r in found])

    return api
