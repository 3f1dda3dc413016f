"""``herder service list`` and ``herder service info NAME``: the native services on the agent at HERDER_ADDR.

As ``nomad service list`` / ``info``: the services of ``provider = "nomad"`` (and, with the embedded
backend, those naming no provider), from herder's embedded registry.
"""

from __future__ import annotations

import json

import click

from herder.cli.client import AgentClient
from herder.cli.remote import config_option
from herder.cli.terminal import printable


@click.group()
def service() -> None:
    """List the native services on the agent at HERDER_ADDR."""


@service.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
@config_option
def service_list(as_json: bool) -> None:
    """Every native service, with its instances' tags."""
    found = AgentClient().request("GET", "/v1/services")
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    if not found["services"]:
        click.echo("No service registrations found")
        return
    rows = [(printable(entry["name"]), _tags(entry["tags"])) for entry in found["services"]]
    width = max(len("Service Name"), *(len(name) for name, _ in rows))
    click.echo(f"{'Service Name':<{width}}  Tags")
    for name, tags in rows:
        click.echo(f"{name:<{width}}  {tags}")


def _tags(tags: list[str]) -> str:
    """A job's tags as the table shows them, each made safe for a terminal (:func:`printable`)."""
    return f"[{','.join(printable(tag) for tag in tags)}]"


@service.command("info")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
@config_option
def service_info(name: str, as_json: bool) -> None:
    """Every instance of the service NAME: its job, allocation, address and tags."""
    found = AgentClient().request("GET", f"/v1/services/{name}")  # the client quotes the path
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    rows = [(printable(i["job"]), printable(i["alloc_id"][:8]), printable(f"{i['address']}:{i['port']}"),
             _tags(i["tags"]))
            for i in found["instances"]]
    header = ("Job ID", "Alloc ID", "Address", "Tags")
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
