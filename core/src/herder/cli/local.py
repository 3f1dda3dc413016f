"""The commands that load the plugins in this process: ``run``, ``validate``, ``drivers``, ``plugins``, ``reap``."""

from __future__ import annotations

import contextlib
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import BinaryIO

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from herder import app
from herder.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    F,
    fail,
    invalid,
    meta_option,
    read_payload,
    say,
    variable_options,
)
from herder.cli.output import TaskOutput
from herder.cli.render import make_view, summary
from herder.client.client import JobSource
from herder.client.config import Config, load_config
from herder.errors import ConfigError, JobError, PlacementError
from herder.model import MAX_PAYLOAD, Job
from herder.plugins.hooks import Hooks
from herder.state import StateError


def plugin_options(func: F) -> F:
    """``--config``, ``--data-dir`` and ``--disable-plugin``, shared by the commands that load plugins."""
    func = click.option("--disable-plugin", "disabled", multiple=True, metavar="NAME",
                        help="Do not load this plugin (repeatable).")(func)
    func = click.option("--data-dir", type=click.Path(path_type=Path), help="Where allocations live.")(func)
    func = click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False),
                        help="Configuration file (TOML).")(func)
    return func


def configuration(config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...], *,
                  agent: bool = False) -> Config:
    """The configuration (the agent's with ``agent``); a bad one exits 2."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return load_config(config_path, data_dir=data_dir, agent=agent, disabled=disabled)
    except ConfigError as exc:
        fail(str(exc), EXIT_INVALID)


def setup(config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> tuple[Config, Hooks]:
    """Read the configuration and load the plugins; a bad configuration exits 2."""
    config = configuration(config_path, data_dir, disabled)
    return config, app.load_hooks(config)


ALLOW_FILE_OUTSIDE_HELP = ("Let file() in the job file read outside the job file's directory "
                           "(the default with [client] allow_file_outside = true).")


def read_job(path: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], hooks: Hooks,
             allow_file_outside: bool) -> tuple[Job, JobSource]:
    """Parse and validate a job file, task configs included; exits 2 on any error."""
    try:
        job, source = app.read_job(path, app.parse_variables(variables), hooks, var_files,
                                   allow_file_outside=allow_file_outside)
    except JobError as exc:
        invalid(f"{path} is not a valid job file", exc.errors)
    for warning in job.warnings:
        say(f"Warning: {warning}")
    return job, source


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@variable_options
@click.option("--allow-file-outside", is_flag=True, help=ALLOW_FILE_OUTSIDE_HELP)
@click.option("--node", "check_node", is_flag=True,
              help="Check the job against this node too: its datacenter, attributes, meta, drivers and free disk.")
@plugin_options
def validate(file: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], allow_file_outside: bool,
             check_node: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Parse and validate FILE; print each error with its path.

    With --node, say also whether this node would place it, as a plan would.
    """
    config, hooks = setup(config_path, data_dir, disabled)
    job, _ = read_job(file, variables, var_files, hooks, allow_file_outside or config.client.allow_file_outside)
    if check_node:
        unplaced = app.unplaced(config, hooks, job)
        if unplaced:
            invalid(f"{file}: job {job.name} does not fit this node", [u.describe() for u in unplaced])
    click.echo(f"Job validation successful: {job.name} ({sum(len(g.tasks) for g in job.groups)} tasks)")


def dispatch(job: Job, source: JobSource, meta: dict[str, str], payload: bytes) -> tuple[Job, JobSource]:
    """The child of the parameterized ``job`` that ``herder run`` runs; a refused dispatch exits 2."""
    try:
        child, child_source = app.dispatch_once(source, meta, payload)
    except JobError as exc:
        invalid(f"cannot dispatch job {job.name}", exc.errors)
    say(f"Dispatched job {child.name}")
    return child, child_source


@click.command()
@click.argument("file", type=click.Path(path_type=Path))
@variable_options
@click.option("--json", "as_json", is_flag=True, help="Print events and the summary as JSON lines.")
@click.option("--logs", "show_logs", is_flag=True, help="Show the tasks' output too.")
@click.option("--keep", is_flag=True,
              help="If herder dies, leave the tasks running for the next 'herder run' of this job to reattach.")
@click.option("--allow-file-outside", is_flag=True, help=ALLOW_FILE_OUTSIDE_HELP)
@meta_option
@click.option("--payload", "payload_file", type=click.File("rb"), metavar="FILE",
              help="The payload of the dispatched job (- reads stdin).")
@plugin_options
def run(file: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], as_json: bool, show_logs: bool, keep: bool,
        allow_file_outside: bool, meta: dict[str, str], payload_file: BinaryIO | None, config_path: Path | None,
        data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Run the job in FILE in the foreground until its tasks finish or it is interrupted.

    A parameterized job is dispatched once, with --meta and --payload: its child runs.
    """
    config, hooks = setup(config_path, data_dir, disabled)
    for warning in app.failed_plugins(hooks):
        say(f"Warning: {warning}")
    job, source = read_job(file, variables, var_files, hooks, allow_file_outside or config.client.allow_file_outside)
    if job.parameterized is not None:
        job, source = dispatch(job, source, meta, read_payload(payload_file, MAX_PAYLOAD))
    elif meta or payload_file is not None:
        fail(f"--meta and --payload dispatch a parameterized job; job {job.name} is not one", EXIT_INVALID)
    view = make_view(as_json)
    try:
        foreground = app.ForegroundRun(config, hooks, job, source, on_event=view.show, on_health=view.health,
                                       on_message=view.message, keep=keep)
    except ConfigError as exc:  # a data dir another user could change
        fail(str(exc), EXIT_INVALID)

    def stop(signum: int, _frame: FrameType | None) -> None:
        view.message(f"Received {signal.Signals(signum).name}: stopping every task")
        threading.Thread(target=foreground.stop, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        try:
            foreground.place()
        except PlacementError as exc:
            say(f"Error: cannot place job {job.name}: {exc}")
            if as_json:
                click.echo(json.dumps({"summary": summary("failed", foreground.allocs, foreground.health)}))
            sys.exit(EXIT_FAILED)
        for orphan in foreground.reaped.orphans:
            view.message(f"{orphan.alloc.name}: left running by a herder that died; stopping it")
        for alloc in foreground.allocs:
            if alloc.restored:
                view.message(f"{alloc.alloc.name}: reattaching to the tasks of an earlier run")
            for port in alloc.ports:
                view.message(f"{alloc.alloc.name}: port {port.label} is {port.host_ip}:{port.value}")
        with view, (TaskOutput(foreground.allocs, view.output) if show_logs else contextlib.nullcontext()):
            status = foreground.run()
    finally:
        try:
            foreground.close()
        except StateError as exc:  # what the run did could not all be saved
            say(f"Error: {exc}")
            status = "failed"
    if as_json:
        click.echo(json.dumps({"summary": summary(status, foreground.allocs, foreground.health)}))
    else:
        view.message(f"Job {job.name}: {status}")
    sys.exit(EXIT_FAILED if status == "failed" else EXIT_OK)


@click.command(hidden=True)
@plugin_options
def reap(config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Stop and clean up the tasks of foreground runs that died (the supervisor runs this)."""
    config, hooks = setup(config_path, data_dir, disabled)
    count = app.reap(config, hooks)
    say(f"herder reap: {count} allocation(s) stopped and cleaned up")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@plugin_options
def drivers(as_json: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """List every driver: distribution, detected, healthy and attributes."""
    _, hooks = setup(config_path, data_dir, disabled)
    rows = app.driver_rows(hooks)
    if as_json:
        click.echo(json.dumps({"drivers": rows}, indent=2))
        return
    table = Table("Driver", "Distribution", "Detected", "Healthy", "Description", "Attributes")
    for row in rows:
        table.add_row(row["name"], f"{row['distribution']} {row['version']}", _yes(row["detected"]),
                      _yes(row["healthy"]), escape(row["description"]),
                      "\n".join(f"{k} = {v}" for k, v in row["attributes"].items()))
    Console(highlight=False).print(table)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@plugin_options
def node(as_json: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Show this node as job files' constraints see it: ${node.*}, ${meta.*} and ${attr.*}."""
    config, hooks = setup(config_path, data_dir, disabled)
    found = app.this_node(config, hooks)
    fields = {"node.unique.name": found.name, "node.unique.id": found.id, "node.datacenter": found.datacenter,
              "node.region": found.region, "node.class": found.node_class}
    if as_json:
        click.echo(json.dumps({"node": fields, "meta": dict(found.meta), "attributes": dict(sorted(
            found.attributes.items()))}, indent=2))
        return
    table = Table("Reference", "Value")
    rows = [*fields.items(), *((f"meta.{k}", v) for k, v in sorted(found.meta.items())),
            *((f"attr.{k}", v) for k, v in sorted(found.attributes.items()))]
    for reference, value in rows:
        table.add_row(escape(f"${{{reference}}}"), escape(value))
    Console(highlight=False).print(table)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@plugin_options
def plugins(as_json: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """List every plugin, loaded or failed, with its distribution and hooks."""
    _, hooks = setup(config_path, data_dir, disabled)
    hooks.task_schemas()  # a driver whose schema hook is broken shows as failed
    rows = app.plugin_rows(hooks)
    if as_json:
        click.echo(json.dumps({"plugins": rows}, indent=2))
        return
    table = Table("Name", "Kind", "Status", "Distribution", "Hooks / error")
    for r in rows:
        hooks_list = ", ".join(h.removeprefix("herder_") for h in r["hooks"])
        detail = f"[red]{escape(r['error'])}[/]" if r["error"] else hooks_list
        status = {"loaded": "[green]loaded[/]", "failed": "[red]failed[/]"}.get(r["status"], r["status"])
        table.add_row(r["name"], r["kind"], status, f"{r['distribution']} {r['version']}".strip(), detail)
    Console(highlight=False).print(table)


def _yes(value: bool) -> str:
    return "[green]yes[/]" if value else "[red]no[/]"
