"""``GET /v1/metrics``: the agent's metrics, as Prometheus' text (``?format=prometheus``) or as JSON.

One registry per application, of what is read when scraped (the client's
figures, :class:`herder.client.metrics.ClientCollector`; the task events by
type; the agent's own process) and of the API's requests, counted as they are
served. A request is labelled by its route's template
(``/v1/allocations/{alloc_id}``), never by its path, and by its method among
the ones HTTP defines: no request can add a series of its own choosing.
Requests without the token never reach the application, so they are not
counted either.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, ProcessCollector, generate_latest
from prometheus_client import Counter as RequestCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herder.agent.events import EventLog
from herder.app import Agent
from herder.client.metrics import ClientCollector

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})
UNMATCHED = "unmatched"
"""The route label of a request no route answers (a 404 of an unknown path)."""


class Sample(BaseModel):
    name: str = Field(description="The sample's name: the family's, or with a suffix (`_total`, `_bucket`, ...)")
    labels: dict[str, str]
    value: float | str = Field(description="A number; `NaN`, `+Inf` or `-Inf` as a string")


class Family(BaseModel):
    name: str
    type: str = Field(description="counter, gauge, histogram, summary, info, ...")
    help: str
    samples: list[Sample]


class Metrics(BaseModel):
    """The same families and samples as the Prometheus text."""

    families: list[Family]


class AgentCollector(Collector):
    """The agent's version, and the task events by type since it started."""

    def __init__(self, agent: Agent, events: EventLog) -> None:
        self._agent = agent
        self._events = events

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily("herder_agent_info", "The agent's version and node (always 1).",
                                 labels=["version", "node"])
        info.add_metric([self._agent.version, self._agent.config.node_name], 1)
        yield info
        family = CounterMetricFamily("herder_task_events", "Task events by type since the agent started.",
                                     labels=["type"])
        for kind, count in sorted(self._events.counts().items()):
            family.add_metric([kind], count)
        yield family


class RequestMetrics:
    """ASGI middleware counting the API's requests and timing them, by method and route template."""

    def __init__(self, app: ASGIApp, registry: CollectorRegistry) -> None:
        self.app = app
        self.requests = RequestCounter("herder_api_requests", "API requests answered, by route and status.",
                                       ["method", "route", "status"], registry=registry)
        self.latency = Histogram("herder_api_request_duration_seconds",
                                 "Time to answer API requests, by route (a streamed answer until its end).",
                                 ["method", "route"], registry=registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless an answer starts

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", UNMATCHED)
            method = scope["method"] if scope["method"] in METHODS else "OTHER"
            self.requests.labels(method, route, str(status)).inc()
            self.latency.labels(method, route).observe(time.perf_counter() - started)


def registry_of(agent: Agent, events: EventLog) -> CollectorRegistry:
    """A registry of what is read at each scrape: the client's figures, the agent's, its process."""
    registry = CollectorRegistry()
    registry.register(ClientCollector(agent.client, agent.usage, agent.health))
    registry.register(AgentCollector(agent, events))
    ProcessCollector(namespace="herder", registry=registry)
    return registry


def as_json(registry: CollectorRegistry) -> dict[str, Any]:
    """The registry's families in the shape of :class:`Metrics` (built as plain data: validating
    hundreds of samples each scrape would cost more than collecting them)."""
    return {"families": [
        {"name": family.name, "type": family.type, "help": family.documentation,
         "samples": [{"name": s.name, "labels": s.labels, "value": s.value if math.isfinite(s.value) else str(s.value)}
                     for s in family.samples]}
        for family in registry.collect()]}


def install(api: FastAPI, agent: Agent, events: EventLog) -> None:
    """Add ``GET /v1/metrics`` to ``api``, and the counting of its requests."""
    registry = registry_of(agent, events)
    api.add_middleware(RequestMetrics, registry=registry)

    # Not a coroutine: reading the tasks' usage waits on the drivers, in the thread pool.
    @api.get("/v1/metrics", response_model=Metrics, tags=["agent"],
             responses={200: {"content": {CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
                              "description": "The metrics as JSON, or in Prometheus' text format "
                                             "with `format=prometheus`"}})
    def metrics(format: Annotated[Literal["prometheus", "json"],
                                  Query(description="`prometheus` for Prometheus' text format")] = "json"
                ) -> Response:
        if format == "prometheus":
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
        return JSONResponse(as_json(registry))
