"""The Nomad-compatible API's routes of planning and finding: ``nomad job plan`` (``/v1/job/:id/plan``),
``nomad status ID`` and ``nomad ui JOB`` (``/v1/search``, ``/v1/search/fuzzy``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict

from herder import app
from herder.agent.nomad.ledger import Ledger
from herder.agent.nomad.plan import plan
from herder.agent.nomad.shapes import NAMESPACE, NomadError, Shapes, foreign

Answer = Callable[[Any, int], Response]
Decode = Callable[..., Any]

SEARCH_LIMIT = 20
"""The most matches of one context a search answers, as Nomad's (the rest is said truncated)."""
PREFIX_CONTEXTS = ("allocs", "deployment", "evals", "jobs", "nodes")
"""The contexts herder has, of those of Nomad's search; the others (plugins, volumes, ...) match nothing."""
OTHER_CONTEXTS = ("namespaces", "plugins", "scaling_policy", "volumes")
FUZZY_CONTEXTS = ("allocs", "classes", "commands", "groups", "images", "jobs", "nodes", "services", "tasks")
"""What a fuzzy search of ``all`` answers (Nomad 1.1's, within jobs too)."""
FUZZY_MIN = 2
"""The shortest text a fuzzy search takes, as Nomad's."""


class JobPlanRequest(BaseModel):
    """``PUT /v1/job/:id/plan``: the job in Nomad's JSON; whether to answer its diff."""

    model_config = ConfigDict(extra="ignore")
    Job: dict[str, Any]
    Diff: bool = False
    PolicyOverride: bool = False


class SearchRequest(BaseModel):
    """``PUT /v1/search``: a prefix of IDs, in one context or ``all``."""

    model_config = ConfigDict(extra="ignore")
    Prefix: str = ""
    Context: str = "all"


class FuzzySearchRequest(BaseModel):
    """``PUT /v1/search/fuzzy``: a text found anywhere in names, in one context or ``all``."""

    model_config = ConfigDict(extra="ignore")
    Text: str = ""
    Context: str = "all"


def register(api: FastAPI, agent: app.Agent, ledger: Ledger, shapes: Shapes, *, answer: Answer,
             decode: Decode) -> None:
    """Add the routes to ``api`` (before its ``/v1/job/{name}`` routes, which would take ``plan``
    for a job's name); ``answer`` and ``decode`` are the API's."""

    @api.put("/v1/job/{name:path}/plan", openapi_extra={"requestBody": {"content": {"application/json": {
        "schema": JobPlanRequest.model_json_schema()}}}})
    @api.post("/v1/job/{name:path}/plan", include_in_schema=False)
    async def job_plan(request: Request, name: str) -> Response:
        body = await decode(request, JobPlanRequest)
        if (body.Job.get("ID") or body.Job.get("Name")) != name:
            raise NomadError(400, "Job ID does not match")
        found = await asyncio.to_thread(plan, agent, shapes, name, body.Job)
        if not body.Diff:
            found["Diff"] = None
        return answer(found, ledger.index())

    @api.put("/v1/search")
    @api.post("/v1/search", include_in_schema=False)
    async def search(request: Request) -> Response:
        body = await decode(request, SearchRequest)
        contexts = _contexts(body.Context, PREFIX_CONTEXTS + OTHER_CONTEXTS)
        found = {} if foreign(request) else await asyncio.to_thread(_prefix_matches, agent, ledger, shapes,
                                                                    body.Prefix, contexts)
        matches: dict[str, list[str] | None] = {}
        truncations: dict[str, bool] = {}
        for context in contexts:
            ids = sorted(found.get(context, ()))
            matches[context] = ids[:SEARCH_LIMIT] if ids or body.Context != "all" else None
            truncations[context] = len(ids) > SEARCH_LIMIT
        index = ledger.index()
        return answer({"Matches": matches, "Truncations": truncations, "Index": index, "LastContact": 0,
                       "KnownLeader": True}, index)

    @api.put("/v1/search/fuzzy")
    @api.post("/v1/search/fuzzy", include_in_schema=False)
    async def fuzzy(request: Request) -> Response:
        body = await decode(request, FuzzySearchRequest)
        contexts = _contexts(body.Context, FUZZY_CONTEXTS)
        if len(body.Text) < FUZZY_MIN:
            raise NomadError(400, f"fuzzy search query must be at least {FUZZY_MIN} characters, got {len(body.Text)}")
        found = {} if foreign(request) else await asyncio.to_thread(_fuzzy_matches, agent, shapes, body.Text)
        matches: dict[str, list[dict[str, Any]]] = {}
        truncations: dict[str, bool] = {}
        for context in contexts:
            items = found.get(context, [])
            matches[context] = items[:SEARCH_LIMIT]
            truncations[context] = len(items) > SEARCH_LIMIT
        index = ledger.index()
        return answer({"Matches": matches, "Truncations": truncations, "Index": index, "LastContact": 0,
                       "KnownLeader": True}, index)


def _contexts(context: str, known: tuple[str, ...]) -> tuple[str, ...]:
    """The contexts a search of ``context`` looks in, of those ``known``; 400 with Nomad's message for
    one it does not know."""
    every = tuple(sorted(known))
    if context in ("all", ""):
        return every
    if context not in every:
        raise NomadError(400, f"context must be one of [{' '.join(every)}] or 'all' for all contexts; "
                              f"got {context!r}".replace("'", '"'))
    return (context,)


def _prefix_matches(agent: app.Agent, ledger: Ledger, shapes: Shapes, prefix: str,
                    contexts: Iterable[str]) -> dict[str, list[str]]:
    """The IDs beginning with ``prefix``, by context (only the ``contexts`` asked are read)."""
    wanted = set(contexts)
    sources: dict[str, Callable[[], Iterable[str]]] = {
        "jobs": lambda: set(agent.jobs()) | set(agent.parents()),
        "allocs": lambda: (alloc.alloc.id for alloc in agent.allocs()),
        "evals": lambda: (evaluation.id for evaluation in ledger.evaluations()),
        "deployment": lambda: (deployment.id for deployment in ledger.deployments()),
        "nodes": lambda: [shapes.node_id],
    }
    return {context: [found for found in source() if found.startswith(prefix)]
            for context, source in sources.items() if context in wanted}


def _fuzzy_matches(agent: app.Agent, shapes: Shapes, text: str) -> dict[str, list[dict[str, Any]]]:
    """Nomad 1.1's fuzzy search: the names holding ``text`` (in any case) of jobs, their groups, tasks and
    services and their tasks' commands, images and classes (the latest version of each job), allocations
    and the node, each with its scope (the namespace, then the IDs of what holds it), the earliest
    match first."""
    wanted = text.lower()
    found: dict[str, list[tuple[int, str, list[str]]]] = {}

    def match(context: str, name: str, *scope: str) -> None:
        if (at := name.lower().find(wanted)) >= 0:
            found.setdefault(context, []).append((at, name, list(scope)))

    jobs = {name: allocs[-1].job for name, allocs in agent.jobs().items()}
    jobs |= {name: parent.job for name, parent in agent.parents().items()}
    for name, job in jobs.items():
        match("jobs", name, NAMESPACE, name)
        for group in job.groups:
            match("groups", group.name, NAMESPACE, name)
            for service in group.services:
                match("services", service.name, NAMESPACE, name, group.name)
            for task in group.tasks:
                match("tasks", task.name, NAMESPACE, name, group.name)
                for service in task.services:
                    match("services", service.name, NAMESPACE, name, group.name, task.name)
                key = _DRIVER_KEYS.get(task.driver)
                if key is not None and isinstance(value := task.config.get(key[1]), str):
                    match(key[0], value, NAMESPACE, name, group.name, task.name)
    for alloc in agent.allocs():
        match("allocs", alloc.alloc.name, NAMESPACE, alloc.alloc.id)
    match("nodes", agent.config.node_name, shapes.node_id)
    return {context: [{"ID": name, "Scope": scope} for _, name, scope in sorted(matches, key=lambda m: m[:2])]
            for context, matches in found.items()}


_DRIVER_KEYS = {"docker": ("images", "image"), "exec": ("commands", "command"),
                "raw_exec": ("commands", "command"), "java": ("classes", "class")}
"""What Nomad's fuzzy search reads of a task's config, by driver: its context and the config's key."""
