"""The Nomad-compatible API's routes of the agent and its node: ``nomad server members``, ``node drain``,
``node eligibility``, ``system gc``, ``operator metrics``, ``monitor``; and ``nomad ui``'s address.

The node is the agent: a drain stops its allocations and closes it to new jobs
(:meth:`herder.app.Agent.begin_drain`), eligibility opens or closes it without
stopping anything, the collection is the agent's (:mod:`herder.client.gc`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, ConfigDict

from herder import app
from herder.agent import metrics
from herder.agent.events import EventLog
from herder.agent.nomad.ledger import Ledger
from herder.agent.nomad.shapes import REGION, NomadError, Shapes

Answer = Callable[[Any, int], Response]
Decode = Callable[..., Any]

LOG_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "error": logging.ERROR}
"""Nomad's log levels (hclog's), as Python's."""
_HCLOG_NAMES = {logging.DEBUG: "DEBUG", logging.INFO: "INFO", logging.WARNING: "WARN", logging.ERROR: "ERROR",
                logging.CRITICAL: "ERROR"}
MONITOR_BACKLOG = 512
"""Log lines held for a slow ``monitor`` client; beyond them lines are dropped, never the agent slowed."""
HEARTBEAT = 1.0
"""Seconds between heartbeat frames of a quiet log stream, as the log route's."""


class NodeDrainRequest(BaseModel):
    """``PUT /v1/node/:id/drain``: a drain spec to start one, none to end it."""

    model_config = ConfigDict(extra="ignore")
    DrainSpec: dict[str, Any] | None = None
    MarkEligible: bool = False


class NodeEligibilityRequest(BaseModel):
    """``PUT /v1/node/:id/eligibility``."""

    model_config = ConfigDict(extra="ignore")
    Eligibility: str = ""


def register(api: FastAPI, agent: app.Agent, events: EventLog, ledger: Ledger, shapes: Shapes, *,
             answer: Answer, decode: Decode, ui_address: str) -> None:
    """Add the routes to ``api``; ``answer`` and ``decode`` are the API's, ``ui_address`` (``host:port``) is
    where the agent's main listener, and its web UI, listen."""
    registry = metrics.registry_of(agent, events)

    @api.get("/v1/agent/members")
    async def members() -> Response:
        config = agent.config
        return answer({"ServerName": config.node_name, "ServerRegion": REGION, "ServerDC": config.datacenter,
                       "Members": [shapes.member()]}, ledger.index())

    @api.put("/v1/system/gc")
    @api.post("/v1/system/gc", include_in_schema=False)
    def system_gc() -> Response:
        agent.collect_garbage()
        return answer(None, ledger.index())

    @api.put("/v1/node/{node_id}/drain")
    @api.post("/v1/node/{node_id}/drain", include_in_schema=False)
    async def drain(request: Request, node_id: str) -> Response:
        shapes.check_node(node_id)
        body = await decode(request, NodeDrainRequest)
        if body.DrainSpec is not None:
            await asyncio.to_thread(agent.begin_drain)
        else:
            agent.end_drain(eligible=body.MarkEligible)
        index = ledger.change()
        if not agent.drain_pending():
            # Complete at once (nothing to stop, or ended): a change of its own, as Nomad's drainer's, which
            # the command line's watch of the node, from the index answered here, wakes for.
            ledger.change()
        return answer({"NodeModifyIndex": index, "EvalIDs": None, "EvalCreateIndex": 0, "LastIndex": index},
                      index)

    @api.put("/v1/node/{node_id}/eligibility")
    @api.post("/v1/node/{node_id}/eligibility", include_in_schema=False)
    async def eligibility(request: Request, node_id: str) -> Response:
        shapes.check_node(node_id)
        body = await decode(request, NodeEligibilityRequest)
        if body.Eligibility not in ("eligible", "ineligible"):
            raise NomadError(400, f"invalid scheduling eligibility {body.Eligibility!r}")
        agent.set_eligible(body.Eligibility == "eligible")
        index = ledger.change()
        return answer({"NodeModifyIndex": index, "EvalIDs": None, "EvalCreateIndex": 0, "LastIndex": index},
                      index)

    # Not a coroutine: reading the tasks' usage waits on the drivers, in the thread pool.
    @api.get("/v1/metrics")
    def operator_metrics(format: str = "") -> Response:
        if format == "prometheus":
            return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
        if format:
            raise NomadError(400, f"Invalid metrics format {format!r}: prometheus, or none for JSON")
        return answer(nomad_metrics(registry), ledger.index())

    @api.get("/v1/agent/monitor")
    async def monitor(request: Request, log_level: str = "info", plain: bool = False) -> Response:
        level = LOG_LEVELS.get(log_level.lower())
        if level is None:
            raise NomadError(400, f"Unknown log level: {log_level}")
        lines = _subscribe(level)

        async def stream() -> AsyncIterator[bytes]:
            with lines as queue:
                while not await request.is_disconnected():
                    try:
                        line = await asyncio.wait_for(queue.get(), HEARTBEAT)
                    except TimeoutError:
                        if not plain:
                            yield b"{}"
                        continue
                    yield line if plain else json.dumps({"Data": base64.b64encode(line).decode("ascii")}).encode()

        return StreamingResponse(stream(), media_type="text/plain" if plain else "application/json")

    @api.get("/ui", include_in_schema=False)
    @api.get("/ui/{page:path}", include_in_schema=False)
    async def ui(request: Request, page: str = "") -> Response:
        """``nomad ui`` opens this listener's ``/ui/jobs/<job>``: the web UI is the main listener's, which asks
        for the token (a URL opens no session) and then shows the page. Outside the token's guard, as the
        UI's pages are: this answers nothing but where the UI is."""
        host, _, port = ui_address.rpartition(":")
        if host in ("0.0.0.0", "::", "[::]"):  # a wildcard bind: reached by the name this request came by
            host = request.url.hostname or "127.0.0.1"
        host = host.strip("[]")
        scheme = "https" if agent.config.tls.cert_file is not None else "http"
        origin = f"{scheme}://{f'[{host}]' if ':' in host else host}:{port}"
        return RedirectResponse(f"{origin}/ui/{quote(page, safe='/')}", status_code=307)


class _Lines(logging.Handler):
    """The agent's log records at ``level`` or above, as hclog's lines, into a bounded queue of the event loop."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[bytes] = asyncio.Queue(MONITOR_BACKLOG)

    def emit(self, record: logging.LogRecord) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        level = _HCLOG_NAMES.get(record.levelno, "INFO")
        line = f"{stamp} [{level}]{' ' * (6 - len(level))}{record.name}: {record.getMessage()}\n"
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the agent is stopping
            self.loop.call_soon_threadsafe(self._put, line.encode("utf-8", "replace"))

    def _put(self, line: bytes) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(line)


@contextlib.contextmanager
def _subscribe(level: int) -> Iterator[asyncio.Queue[bytes]]:
    """The agent's log lines at ``level`` or above from now on, while the context lasts."""
    handler = _Lines(level)
    logger = logging.getLogger("herder")
    logger.addHandler(handler)
    try:
        yield handler.queue
    finally:
        logger.removeHandler(handler)


def nomad_metrics(registry: CollectorRegistry) -> dict[str, Any]:
    """The registry's samples in the shape of Nomad's ``/v1/metrics`` (go-metrics' summary): gauges,
    counters and, for histograms, samples; a name's dots are Prometheus' underscores."""
    gauges: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    for family in registry.collect():
        values = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        for (name, labels), value in values.items():
            if not math.isfinite(value):
                continue
            if family.type == "gauge" or (family.type not in ("counter", "histogram") and name == family.name):
                gauges.append({"Name": name, "Value": value, "Labels": dict(labels)})
            elif family.type == "counter" and name.endswith("_total"):
                counters.append({"Name": family.name, "Count": int(value), "Rate": 0, "Sum": value, "Min": value,
                                 "Max": value, "Mean": value, "Stddev": 0, "Labels": dict(labels)})
            elif family.type == "histogram" and name.endswith("_count"):
                total = values.get((family.name + "_sum", labels), 0.0)
                samples.append({"Name": family.name, "Count": int(value), "Rate": 0, "Sum": total, "Min": 0,
                                "Max": 0, "Mean": total / value if value else 0.0, "Stddev": 0,
                                "Labels": dict(labels)})
    return {"Timestamp": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime()), "Gauges": gauges,
            "Points": [], "Counters": counters, "Samples": samples}
