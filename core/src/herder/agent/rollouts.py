"""The routes of job versions and deployments: history, revert, scale, promote, and each deployment's controls.

Included before the route of a job (``GET /v1/jobs/{name:path}``), whose
``:path`` would take ``.../versions`` as a name otherwise.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from herder.agent import models
from herder.app import Agent
from herder.client.deployments import Deployment

JobName = Annotated[str, Path(min_length=1, max_length=256, description="A job's name; it may contain /.")]
DeploymentId = Annotated[str, Path(min_length=1, max_length=64, description="A deployment's ID, or a prefix of it.")]


def deployment_json(deployment: Deployment) -> models.Deployment:
    groups = {name: models.DeploymentGroup(
        desired_total=group.desired_total, desired_canaries=group.desired_canaries, promoted=group.promoted,
        placed=len(group.placed), healthy=group.healthy, unhealthy=group.unhealthy, canaries=group.canaries,
        progress_by=group.progress_by or None) for name, group in deployment.groups.items()}
    return models.Deployment(id=deployment.id, job=deployment.job, version=deployment.version,
                             status=deployment.status, description=deployment.description, groups=groups,
                             allocations=deployment.healthy)


def routes(agent: Agent) -> APIRouter:
    """The routes, over ``agent``'s versions and deployments."""
    api = APIRouter()
    rollouts = agent.rollouts

    @api.get("/v1/jobs/{name:path}/versions", response_model=models.Versions, tags=["jobs"])
    def versions(name: JobName) -> models.Versions:
        return models.Versions(versions=[models.Version(
            version=entry.version.number, job_id=entry.version.job_id, submitted_at=entry.version.submitted_at,
            stable=entry.version.stable, counts=dict(entry.version.counts),
            changes=[str(change) for change in entry.changes])
            for entry in rollouts.history(name)])

    @api.post("/v1/jobs/{name:path}/revert", response_model=models.Version, tags=["jobs"],
              description="Submit an old version again: it becomes the newest version, deployed as any.")
    def revert(name: JobName, body: models.RevertRequest) -> models.Version:
        version = rollouts.revert(name, body.version)
        return models.Version(version=version.number, job_id=version.job_id, submitted_at=version.submitted_at,
                              stable=version.stable, counts=dict(version.counts), changes=[])

    @api.post("/v1/jobs/{name:path}/scale", response_model=models.Version, tags=["jobs"],
              description="Set a group's count: a new version; the running allocations stay, indexes are "
                          "placed or the highest stopped.")
    def scale(name: JobName, body: models.ScaleRequest) -> models.Version:
        version = rollouts.scale(name, body.group, body.count)
        return models.Version(version=version.number, job_id=version.job_id, submitted_at=version.submitted_at,
                              stable=version.stable, counts=dict(version.counts), changes=[])

    @api.post("/v1/jobs/{name:path}/promote", response_model=models.Deployment, tags=["deployments"],
              description="Promote the canaries of the job's latest deployment.")
    def promote_job(name: JobName, body: models.PromoteRequest) -> models.Deployment:
        return deployment_json(rollouts.promote(rollouts.latest(name), body.groups))

    @api.get("/v1/deployments", response_model=models.Deployments, tags=["deployments"])
    def deployments(job: str | None = None) -> models.Deployments:
        return models.Deployments(deployments=[deployment_json(d) for d in rollouts.deployments(job)])

    @api.get("/v1/deployments/{deployment_id}", response_model=models.Deployment, tags=["deployments"])
    def deployment(deployment_id: DeploymentId) -> models.Deployment:
        return deployment_json(rollouts.deployment(deployment_id))

    @api.post("/v1/deployments/{deployment_id}/promote", response_model=models.Deployment, tags=["deployments"])
    def promote(deployment_id: DeploymentId, body: models.PromoteRequest) -> models.Deployment:
        return deployment_json(rollouts.promote(rollouts.deployment(deployment_id), body.groups))

    @api.post("/v1/deployments/{deployment_id}/fail", response_model=models.Deployment, tags=["deployments"],
              description="Fail the deployment: nothing more is placed; with auto_revert the last stable "
                          "version is deployed again.")
    def fail(deployment_id: DeploymentId) -> models.Deployment:
        return deployment_json(rollouts.fail(rollouts.deployment(deployment_id)))

    @api.post("/v1/deployments/{deployment_id}/pause", response_model=models.Deployment, tags=["deployments"])
    def pause(deployment_id: DeploymentId) -> models.Deployment:
        return deployment_json(rollouts.pause(rollouts.deployment(deployment_id), True))

    @api.post("/v1/deployments/{deployment_id}/resume", response_model=models.Deployment, tags=["deployments"])
    def resume(deployment_id: DeploymentId) -> models.Deployment:
        return deployment_json(rollouts.pause(rollouts.deployment(deployment_id), False))

    @api.post("/v1/deployments/{deployment_id}/health", response_model=models.Deployment, tags=["deployments"],
              description="Set the health of allocations of the deployment (health_check = \"manual\").")
    def set_health(deployment_id: DeploymentId, body: models.HealthRequest) -> models.Deployment:
        return deployment_json(rollouts.set_health(rollouts.deployment(deployment_id), body.healthy,
                                                   body.unhealthy))

    return api
