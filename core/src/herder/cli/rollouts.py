"""``herder job history|revert|scale|promote`` and ``herder deployment ...``: versions and deployments on an agent.

The same agent and token as :mod:`herder.cli.remote`'s commands; the ``job``
commands here join its ``job`` group (``herder job`` is loaded from here).
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

import click

from herder.cli.client import AgentClient
from herder.cli.common import say
from herder.cli.remote import config_option, job

__all__ = ["deployment", "job"]

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON answer.")


def _when(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))


@job.command("history")
@click.option("-p", "--diff", "with_diff", is_flag=True, help="Show what changed from the version before.")
@JSON_OPTION
@click.argument("name")
@config_option
def job_history(name: str, with_diff: bool, as_json: bool) -> None:
    """The versions of job NAME, newest first."""
    versions = AgentClient().request("GET", f"/v1/jobs/{name}/versions")
    if as_json:
        click.echo(json.dumps(versions, indent=2))
        return
    for version in versions["versions"]:
        counts = "".join(f"  {group}={count}" for group, count in version["counts"].items())
        click.echo(f"Version {version['version']}  {_when(version['submitted_at'])}  "
                   f"{'stable' if version['stable'] else 'not stable'}{counts}")
        if with_diff:
            for line in version["changes"]:
                click.echo(f"    {line}")


@job.command("revert")
@click.argument("name")
@click.argument("version", type=click.IntRange(min=0))
@config_option
def job_revert(name: str, version: int) -> None:
    """Deploy version VERSION of job NAME again (as its newest version)."""
    made = AgentClient().request("POST", f"/v1/jobs/{name}/revert", json_body={"version": version})
    say(f"Job {name}: version {version} submitted again as version {made['version']}")


@job.command("scale")
@click.argument("name")
@click.argument("group")
@click.argument("count", type=click.IntRange(min=0, max=1000))
@config_option
def job_scale(name: str, group: str, count: int) -> None:
    """Set group GROUP of job NAME to COUNT allocations: the running ones stay."""
    made = AgentClient().request("POST", f"/v1/jobs/{name}/scale", json_body={"group": group, "count": count})
    say(f"Job {name}: group {group} scaled to {count} (version {made['version']})")


@job.command("promote")
@click.option("--group", "groups", multiple=True, help="A group to promote (every group by default).")
@click.argument("name")
@config_option
def job_promote(name: str, groups: tuple[str, ...]) -> None:
    """Promote the canaries of job NAME's latest deployment."""
    deployment = AgentClient().request("POST", f"/v1/jobs/{name}/promote", json_body={"groups": list(groups)})
    say(f"Deployment {deployment['id'][:8]} of job {name}: canaries promoted")


@click.group()
def deployment() -> None:
    """Follow and steer the deployments of job versions."""


def _line(found: dict[str, Any]) -> str:
    return (f"{found['id'][:8]}  {found['job']:<24} version {found['version']:<4} {found['status']:<10} "
            f"{found['description']}")


@deployment.command("list")
@click.option("--job", help="Only the deployments of this job.")
@JSON_OPTION
@config_option
def deployment_list(job: str | None, as_json: bool) -> None:
    """The deployments, newest first."""
    found = AgentClient().request("GET", "/v1/deployments" + (f"?{urlencode({'job': job})}" if job else ""))
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found["deployments"]:
        click.echo("No deployments")
    for entry in found["deployments"]:
        click.echo(_line(entry))


@deployment.command("status")
@JSON_OPTION
@click.argument("deployment_id")
@config_option
def deployment_status(deployment_id: str, as_json: bool) -> None:
    """A deployment (ID or a prefix of it), group by group."""
    found = AgentClient().request("GET", f"/v1/deployments/{deployment_id}")
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    _show(found)


def _show(found: dict[str, Any]) -> None:
    click.echo(_line(found))
    for name, group in found["groups"].items():
        canaries = (f"  canaries {len(group['canaries'])}/{group['desired_canaries']}"
                    f"{' promoted' if group['promoted'] else ''}" if group["desired_canaries"] else "")
        click.echo(f"  {name:<16} desired {group['desired_total']}  placed {group['placed']}  "
                   f"healthy {group['healthy']}  unhealthy {group['unhealthy']}{canaries}")


def _control(action: str, help_text: str) -> None:
    @deployment.command(action, help=help_text)
    @click.argument("deployment_id")
    @config_option
    def command(deployment_id: str) -> None:
        body: dict[str, list[str]] | None = {"groups": []} if action == "promote" else None
        _show(AgentClient().request("POST", f"/v1/deployments/{deployment_id}/{action}", json_body=body))


_control("promote", "Promote the canaries of deployment DEPLOYMENT_ID.")
_control("fail", "Fail deployment DEPLOYMENT_ID (with auto_revert, the last stable version is deployed again).")
_control("pause", "Pause deployment DEPLOYMENT_ID: nothing more is placed until it is resumed.")
_control("resume", "Resume the paused deployment DEPLOYMENT_ID.")


@deployment.command("set-health")
@click.option("--healthy", multiple=True, help="An allocation ID to mark healthy.")
@click.option("--unhealthy", multiple=True, help="An allocation ID to mark unhealthy.")
@click.argument("deployment_id")
@config_option
def deployment_set_health(deployment_id: str, healthy: tuple[str, ...], unhealthy: tuple[str, ...]) -> None:
    """Set the health of allocations of DEPLOYMENT_ID (health_check = "manual")."""
    _show(AgentClient().request("POST", f"/v1/deployments/{deployment_id}/health",
                                json_body={"healthy": list(healthy), "unhealthy": list(unhealthy)}))
