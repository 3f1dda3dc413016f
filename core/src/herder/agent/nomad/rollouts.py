"""Nomad's routes of job versions and deployments: history with diffs, revert, scale, evaluate,
and the deployments' promote, fail and pause, over the client's versions and deployments.

Registered before the routes of a job (``/v1/job/{name:path}``), whose ``:path``
would take ``.../scale`` as a job's name otherwise.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import FastAPI, Path, Request
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from herder.agent.nomad import models
from herder.agent.nomad.diff import job_diff
from herder.agent.nomad.ledger import Evaluation, Ledger
from herder.agent.nomad.shapes import NomadError, Shapes
from herder.app import Agent, NotFound, OutOfBounds
from herder.client.deployments import Deployment

Id = Annotated[str, Path(min_length=1, max_length=256)]
Answer = Callable[[Any, int], Response]
Decode = Callable[..., Any]
Scoped = Callable[..., None]


# The shapes of these routes' requests and answers (Nomad's ``api`` structs).
class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class JobRevertRequest(_Request):
    JobID: str = ""
    JobVersion: int = Field(ge=0)
    EnforcePriorVersion: int | None = None


class JobScaleRequest(_Request):
    Count: int | None = Field(default=None, ge=0, le=1000)
    Target: dict[str, str] = Field(default_factory=dict)
    """``{"Group": name}`` (``Job`` and ``Namespace`` too, as the CLI sends them)."""
    Message: str = ""


class DeploymentPromoteRequest(_Request):
    DeploymentID: str = ""
    All: bool = False
    Groups: list[str] | None = None


class DeploymentPauseRequest(_Request):
    DeploymentID: str = ""
    Pause: bool = False


class DeploymentUpdateResponse(models.Nomad):
    EvalID: str = ""
    EvalCreateIndex: int = 0
    DeploymentModifyIndex: int = 0
    RevertedJobVersion: int | None = None
    LastIndex: int = 0
    RequestTime: int = 0


class TaskGroupScaleStatus(models.Nomad):
    Desired: int = 0
    Placed: int = 0
    Running: int = 0
    Healthy: int = 0
    Unhealthy: int = 0
    Events: list[dict[str, Any]] | None = None


class JobScaleStatus(models.Nomad):
    JobID: str
    Namespace: str = "default"
    JobCreateIndex: int = 0
    JobModifyIndex: int = 0
    JobStopped: bool = False
    TaskGroups: dict[str, TaskGroupScaleStatus] = Field(default_factory=dict)


def ok(model: Any) -> dict[int | str, dict[str, Any]]:
    """A route's answer for the OpenAPI document (the routes answer a :class:`Response`)."""
    return {200: {"model": model}}


def body(model: type[BaseModel]) -> dict[str, Any]:
    """A route's JSON body for the OpenAPI document (the routes read it themselves)."""
    return {"requestBody": {"content": {"application/json": {"schema": model.model_json_schema()}}}}


def register(api: FastAPI, agent: Agent, ledger: Ledger, shapes: Shapes, *, answer: Answer, decode: Decode,
             scoped: Scoped) -> None:
    """Add the routes to ``api`` (before its ``/v1/job/{name}`` routes); ``answer``, ``decode``
    and ``scoped`` are the API's."""
    rollouts = agent.rollouts

    def evaluated(name: str, triggered_by: str) -> Evaluation:
        """The evaluation of a change of job ``name``: its live allocations, and its deployment."""
        live = agent.client.scheduler.live(name)
        return ledger.evaluate(name, live[0].job.type if live else "service", triggered_by, live)

    def registered(evaluation: Evaluation) -> Response:
        index = evaluation.create_index
        return answer(models.JobRegisterResponse(EvalID=evaluation.id, EvalCreateIndex=index,
                                                      JobModifyIndex=index, LastIndex=index), index)

    def deployment_of(deployment_id: str) -> Deployment:
        try:
            return rollouts.deployment(deployment_id)
        except NotFound:
            raise NomadError(404, "deployment not found") from None

    def updated(deployment: Deployment) -> Response:
        evaluation = evaluated(deployment.job, "deployment-watcher")
        index = evaluation.create_index
        return answer(DeploymentUpdateResponse(
            EvalID=evaluation.id, EvalCreateIndex=index, DeploymentModifyIndex=index, LastIndex=index), index)

    @api.get("/v1/job/{name:path}/versions", responses=ok(models.JobVersions))
    def versions(request: Request, name: Id, diffs: bool = False) -> Response:
        shapes.allocs_of(name, request)
        if not agent.job_versions(name):  # a registered job, or a child of one: as it is
            return answer(models.JobVersions(Versions=[shapes.job(name)], Diffs=[] if diffs else None),
                               ledger.index())
        history = rollouts.history(name)
        found: list[dict[str, Any]] = []
        for entry in history:
            version = entry.version
            document = shapes.job(name, version.job_id)
            for group in document.get("TaskGroups") or []:
                group["Count"] = version.counts.get(group.get("Name"), group.get("Count", 1))
            found.append(document | {"Version": version.number, "Stable": version.stable,
                                     "SubmitTime": int(version.submitted_at * 1e9)})
        # Nomad's nested diff of each version to the next, as ``job plan`` shows one, for ``job history -p``.
        differences = [job_diff(older, newer) for newer, older in itertools.pairwise(found)] if diffs else None
        return answer(models.JobVersions(Versions=found, Diffs=differences), ledger.index())

    @api.put("/v1/job/{name:path}/revert", responses=ok(models.JobRegisterResponse),
             openapi_extra=body(JobRevertRequest))
    @api.post("/v1/job/{name:path}/revert", openapi_extra=body(JobRevertRequest))
    async def revert(request: Request, name: Id) -> Response:
        scoped(request, write=True)
        wanted = await decode(request, JobRevertRequest)
        await asyncio.to_thread(rollouts.revert, name, wanted.JobVersion)
        return registered(evaluated(name, "job-register"))

    @api.get("/v1/job/{name:path}/scale", responses=ok(JobScaleStatus))
    def scale_status(request: Request, name: Id) -> Response:
        """Each group's desired count (its latest version's) and its allocations, as ``nomad job scale`` reads."""
        live = shapes.allocs_of(name, request)
        latest = agent.client.versions.latest(name)
        job = agent.client.versions.load(latest) if latest is not None else None
        groups: dict[str, TaskGroupScaleStatus] = {}
        for group in job.groups if job is not None else []:
            mine = [a for a in live if a.group.name == group.name and a.status in ("pending", "running")]
            groups[group.name] = TaskGroupScaleStatus(
                Desired=group.count, Placed=len(mine), Running=sum(a.status == "running" for a in mine))
        index = ledger.index()
        return answer(JobScaleStatus(JobID=name, JobCreateIndex=index, JobModifyIndex=index,
                                                 JobStopped=not any(g.Placed for g in groups.values()),
                                                 TaskGroups=groups), index)

    @api.put("/v1/job/{name:path}/scale", responses=ok(models.JobRegisterResponse),
             openapi_extra=body(JobScaleRequest))
    @api.post("/v1/job/{name:path}/scale", openapi_extra=body(JobScaleRequest))
    async def scale(request: Request, name: Id) -> Response:
        scoped(request, write=True)
        wanted = await decode(request, JobScaleRequest)
        group = wanted.Target.get("Group", "")
        if not group:
            raise NomadError(400, "missing task group name for scaling action")
        if wanted.Count is None:
            raise NomadError(400, "scaling action without a count: herder records no scaling events")
        try:
            await asyncio.to_thread(rollouts.scale, name, group, wanted.Count)
        except OutOfBounds as exc:
            raise NomadError(400, str(exc)) from None
        return registered(evaluated(name, "job-scaling"))

    @api.put("/v1/job/{name:path}/evaluate", responses=ok(models.JobRegisterResponse))
    @api.post("/v1/job/{name:path}/evaluate")
    def evaluate(request: Request, name: Id) -> Response:
        """herder's scheduler is always reconciled: an evaluation is made, complete, and changes nothing."""
        scoped(request, write=True)
        agent.job(name)  # NotFound
        return registered(evaluated(name, "job-eval"))

    @api.put("/v1/deployment/promote/{deployment_id}", responses=ok(DeploymentUpdateResponse),
             openapi_extra=body(DeploymentPromoteRequest))
    @api.post("/v1/deployment/promote/{deployment_id}", openapi_extra=body(DeploymentPromoteRequest))
    async def promote(request: Request, deployment_id: Id) -> Response:
        scoped(request, write=True)
        wanted = await decode(request, DeploymentPromoteRequest)
        groups = [] if wanted.All else wanted.Groups or []
        return updated(await asyncio.to_thread(rollouts.promote, deployment_of(deployment_id), groups))

    @api.put("/v1/deployment/fail/{deployment_id}", responses=ok(DeploymentUpdateResponse))
    @api.post("/v1/deployment/fail/{deployment_id}")
    def fail(request: Request, deployment_id: Id) -> Response:
        scoped(request, write=True)
        return updated(rollouts.fail(deployment_of(deployment_id)))

    @api.put("/v1/deployment/pause/{deployment_id}", responses=ok(DeploymentUpdateResponse),
             openapi_extra=body(DeploymentPauseRequest))
    @api.post("/v1/deployment/pause/{deployment_id}", openapi_extra=body(DeploymentPauseRequest))
    async def pause(request: Request, deployment_id: Id) -> Response:
        scoped(request, write=True)
        wanted = await decode(request, DeploymentPauseRequest)
        return updated(rollouts.pause(deployment_of(deployment_id), wanted.Pause))
