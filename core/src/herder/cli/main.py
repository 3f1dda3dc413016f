"""The ``herder`` command line."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from herder.cli.output import TaskOutput
from herder.cli.render import make_view
from herder.client.job_runner import JobRunner
from herder.config import Config, load_config
from herder.errors import ConfigError, JobError, PlacementError
from herder.jobspec import load_job, validate_task_configs
from herder.model import Job
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

F = TypeVar("F", bound=Callable[..., Any])


def say(text: str) -> None:
    """A message for the user, on stderr."""
    click.echo(text, err=True)


def plugin_options(func: F) -> F:
    """``--config``, ``--data-dir`` and ``--disable-plugin``, shared by the commands that load plugins."""
    func = click.option("--disable-plugin", "disabled", multiple=True, metavar="NAME",
                        help="Do not load this plugin (repeatable).")(func)
    func = click.option("--data-dir", type=click.Path(path_type=Path), help="Where allocations live.")(func)
    func = click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False),
                        help="Configuration file (TOML).")(func)
    return func


def setup(config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> tuple[Config, Hooks]:
    """Read the configuration and load the plugins; a bad configuration exits 2."""
    try:
        config = load_config(config_path, data_dir=data_dir, disabled=disabled)
    except ConfigError as exc:
        say(f"Error: {exc}")
        sys.exit(EXIT_INVALID)
    return config, Hooks(load_plugins(config.plugin, config.disabled_plugins))


def warn_failed_plugins(hooks: Hooks) -> None:
    for record in hooks.plugins.records:
        if record.error:
            say(f"Warning: plugin {record.name} ({record.distribution} {record.version}) "
                      f"was not loaded: {record.error}")


def read_job(path: Path, variables: tuple[str, ...], hooks: Hooks) -> Job:
    """Parse and validate a job file, task configs included; exits 2 on any error."""
    values: dict[str, str] = {}
    for item in variables:
        key, sep, value = item.partition("=")
        if not sep or not key:
            say(f"Error: --var {item!r}: expected KEY=VALUE")
            sys.exit(EXIT_INVALID)
        values[key] = value
    try:
        job = load_job(path, values)
        errors = validate_task_configs(job, {d: hooks.task_schema(d) for d in hooks.drivers})
        if errors:
            raise JobError(errors)
    except JobError as exc:
        say(f"Error: {path} is not a valid job file:")
        for message in exc.errors:
            say(f"  * {message}")
        sys.exit(EXIT_INVALID)
    for warning in job.warnings:
        say(f"Warning: {warning}")
    return job


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="herder")
def cli() -> None:
    """Run tasks on this host through pluggable drivers."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Set a job variable.")
@plugin_options
def validate(file: Path, variables: tuple[str, ...], config_path: Path | None, data_dir: Path | None,
             disabled: tuple[str, ...]) -> None:
    """Parse and validate FILE; print each error with its path."""
    _, hooks = setup(config_path, data_dir, disabled)
    job = read_job(file, variables, hooks)
    click.echo(f"Job validation successful: {job.name} ({sum(len(g.tasks) for g in job.groups)} tasks)")


@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Set a job variable.")
@click.option("--json", "as_json", is_flag=True, help="Print events and the summary as JSON lines.")
@click.option("--logs", "show_logs", is_flag=True, help="Show the tasks' output too.")
@plugin_options
def run(file: Path, variables: tuple[str, ...], as_json: bool, show_logs: bool, config_path: Path | None,
        data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Run the job in FILE in the foreground until its tasks finish or it is interrupted."""
    config, hooks = setup(config_path, data_dir, disabled)
    warn_failed_plugins(hooks)
    job = read_job(file, variables, hooks)
    view = make_view(as_json)
    runner = JobRunner(job, hooks, config, view.show)

    def stop(signum: int, _frame: FrameType | None) -> None:
        view.message(f"Received {signal.Signals(signum).name}: stopping every task")
        threading.Thread(target=runner.stop, daemon=True).start()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        runner.place()
    except PlacementError as exc:
        say(f"Error: cannot place job {job.name}: {exc}")
        sys.exit(EXIT_FAILED)
    for alloc in runner.allocs:
        for port in alloc.ports:
            view.message(f"{alloc.alloc.name}: port {port.label} is {port.host_ip}:{port.value}")
    with view, (TaskOutput(runner, view.output) if show_logs else contextlib.nullcontext()):
        status = runner.run()
    if as_json:
        click.echo(json.dumps({"summary": runner.summary(status)}))
    else:
        view.message(f"Job {job.name}: {status}")
    sys.exit(EXIT_FAILED if status == "failed" else EXIT_OK)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@plugin_options
def drivers(as_json: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """List every driver: distribution, detected, healthy and attributes."""
    _, hooks = setup(config_path, data_dir, disabled)
    rows: list[dict[str, Any]] = []
    for name in hooks.drivers:
        fingerprint = hooks.fingerprint(name)
        record = hooks.plugins.record(name)
        rows.append({"name": name, "distribution": record.distribution if record else "",
                     "version": record.version if record else "", "detected": fingerprint.detected,
                     "healthy": fingerprint.healthy, "description": fingerprint.description,
                     "attributes": dict(sorted(fingerprint.attributes.items()))})
    if as_json:
        click.echo(json.dumps({"drivers": rows}, indent=2))
        return
    table = Table("Driver", "Distribution", "Detected", "Healthy", "Description", "Attributes")
    for row in rows:
        table.add_row(row["name"], f"{row['distribution']} {row['version']}", _yes(row["detected"]),
                      _yes(row["healthy"]), escape(row["description"]),
                      "\n".join(f"{k} = {v}" for k, v in row["attributes"].items()))
    Console(highlight=False).print(table)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@plugin_options
def plugins(as_json: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """List every plugin, loaded or failed, with its distribution and hooks."""
    _, hooks = setup(config_path, data_dir, disabled)
    records = sorted(hooks.plugins.records, key=lambda r: (r.kind, r.name))
    if as_json:
        click.echo(json.dumps({"plugins": [r.to_json() for r in records]}, indent=2))
        return
    table = Table("Name", "Kind", "Status", "Distribution", "Hooks / error")
    for r in records:
        detail = f"[red]{escape(r.error)}[/]" if r.error else ", ".join(h.removeprefix("herder_") for h in r.hooks)
        status = {"loaded": "[green]loaded[/]", "failed": "[red]failed[/]"}.get(r.status, r.status)
        table.add_row(r.name, r.kind, status, f"{r.distribution} {r.version}".strip(), detail)
    Console(highlight=False).print(table)


def _yes(value: bool) -> str:
    return "[green]yes[/]" if value else "[red]no[/]"


def main() -> None:
    """The console script: a bug of herder's is one line, unless HERDER_DEBUG=1 asks for the traceback."""
    try:
        cli()
    except Exception as exc:
        if os.environ.get("HERDER_DEBUG") == "1":
            raise
        say(f"herder: internal error: {type(exc).__name__}: {exc} (HERDER_DEBUG=1 shows the traceback)")
        sys.exit(EXIT_FAILED)
