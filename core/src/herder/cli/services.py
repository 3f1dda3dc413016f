"""``herder service list`` and ``herder service info NAME``: the native services on the agent at HERDER_ADDR.

As ``nomad service list`` / ``info``: the services of ``provider = "nomad"`` (and, with the embedded
backend, those naming no provider), from herder's embedded registry.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import click

from herder.cli.client import AgentClient
from herder.cli.remote import config_option


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
    width = max(len("Service Name"), *(len(entry["name"]) for entry in found["services"]))
    click.echo(f"{'Service Name':<{width}}  Tags")
    for entry in found["services"]:
        click.echo(f"{entry['name']:<{width}}  [{','.join(entry['tags'])}]")


@service.command("info")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print the agent's JSON (documented in docs/agent.md).")
@config_option
def service_info(name: str, as_json: bool) -> None:
    """Every instance of the service NAME: its job, allocation, address and tags."""
    found = AgentClient().request("GET", f"/v1/services/{quote(name, safe='')}")
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    rows = [(i["job"], i["alloc_id"][:8], f"{i['address']}:{i['port']}", f"[{','.join(i['tags'])}]")
            for i in found["instances"]]
    header = ("Job ID", "Alloc ID", "Address", "Tags")
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
