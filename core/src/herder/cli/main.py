"""The ``herder`` command line: arguments in, :mod:`herder.app` use cases, output out."""

from __future__ import annotations

import contextlib
import dataclasses
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

from herder import app
from herder.agent import daemon
from herder.agent.agent import agent_config
from herder.cli.output import TaskOutput
from herder.cli.remote import alloc, job
from herder.cli.render import make_view
from herder.client.client import JobSource
from herder.client.config import Config, load_config
from herder.errors import ConfigError, JobError, PlacementError
from herder.model import Job
from herder.plugins.hooks import Hooks
from herder.state import StateError

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
        say(f"Error: {path} is not a valid job file:")
        for message in exc.errors:
            say(f"  * {message}")
        sys.exit(EXIT_INVALID)
    for warning in job.warnings:
        say(f"Warning: {warning}")
    return job, source


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="herder")
def cli() -> None:
    """Run tasks on this host through pluggable drivers."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Set a job variable.")
@click.option("--var-file", "var_files", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
              help="Set job variables from an .hcl or .json file (repeatable; --var wins).")
@click.option("--allow-file-outside", is_flag=True, help=ALLOW_FILE_OUTSIDE_HELP)
@plugin_options
def validate(file: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], allow_file_outside: bool,
             config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Parse and validate FILE; print each error with its path."""
    config, hooks = setup(config_path, data_dir, disabled)
    job, _ = read_job(file, variables, var_files, hooks, allow_file_outside or config.client.allow_file_outside)
    click.echo(f"Job validation successful: {job.name} ({sum(len(g.tasks) for g in job.groups)} tasks)")


@cli.command()
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Set a job variable.")
@click.option("--var-file", "var_files", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
              help="Set job variables from an .hcl or .json file (repeatable; --var wins).")
@click.option("--json", "as_json", is_flag=True, help="Print events and the summary as JSON lines.")
@click.option("--logs", "show_logs", is_flag=True, help="Show the tasks' output too.")
@click.option("--keep", is_flag=True,
              help="If herder dies, leave the tasks running for the next 'herder run' of this job to reattach.")
@click.option("--allow-file-outside", is_flag=True, help=ALLOW_FILE_OUTSIDE_HELP)
@plugin_options
def run(file: Path, variables: tuple[str, ...], var_files: tuple[Path, ...], as_json: bool, show_logs: bool, keep: bool,
        allow_file_outside: bool, config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Run the job in FILE in the foreground until its tasks finish or it is interrupted."""
    config, hooks = setup(config_path, data_dir, disabled)
    for warning in app.failed_plugins(hooks):
        say(f"Warning: {warning}")
    job, source = read_job(file, variables, var_files, hooks, allow_file_outside or config.client.allow_file_outside)
    view = make_view(as_json)
    foreground = app.ForegroundRun(config, hooks, job, source, on_event=view.show, on_health=view.health,
                                       keep=keep)

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
                click.echo(json.dumps({"summary": foreground.summary("failed")}))
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
        click.echo(json.dumps({"summary": foreground.summary(status)}))
    else:
        view.message(f"Job {job.name}: {status}")
    sys.exit(EXIT_FAILED if status == "failed" else EXIT_OK)


@cli.command(hidden=True)
@plugin_options
def reap(config_path: Path | None, data_dir: Path | None, disabled: tuple[str, ...]) -> None:
    """Stop and clean up the tasks of foreground runs that died (the supervisor runs this)."""
    config, hooks = setup(config_path, data_dir, disabled)
    count = app.reap(config, hooks)
    say(f"herder reap: {count} allocation(s) stopped and cleaned up")


@cli.command()
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


@cli.command()
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


@cli.command()
@click.option("--bind", metavar="HOST:PORT", help="Listen here (default: bind in the configuration, 127.0.0.1:4646).")
@click.option("--drain", is_flag=True, help="On SIGINT/SIGTERM, stop every task gracefully before exiting.")
@plugin_options
def agent(bind: str | None, drain: bool, config_path: Path | None, data_dir: Path | None,
          disabled: tuple[str, ...]) -> None:
    """Run the agent: the client as a daemon with its HTTP API (docs/agent.md).

    SIGINT or SIGTERM stop it and leave its tasks running; the next agent on
    the same data dir reattaches to them.
    """
    daemon.setup_logging()
    try:
        config = load_config(config_path, data_dir=data_dir, agent=True, disabled=disabled)
    except ConfigError as exc:
        say(f"Error: {exc}")
        sys.exit(EXIT_INVALID)
    config = agent_config(config)
    if bind:
        config = dataclasses.replace(config, bind=bind)
    sys.exit(daemon.run(config, drain=drain))


cli.add_command(job)
cli.add_command(alloc)


def _yes(value: bool) -> str:
    return "[green]yes[/]" if value else "[red]no[/]"


def main() -> None:
    """The console script: a bug of herder's is one line, unless HERDER_DEBUG=1 asks for the traceback."""
    try:
        cli()
    except StateError as exc:  # the host's fault (a full disk...), not a bug of herder's
        say(f"herder: {exc}")
        sys.exit(EXIT_FAILED)
    except Exception as exc:
        if os.environ.get("HERDER_DEBUG") == "1":
            raise
        say(f"herder: internal error: {type(exc).__name__}: {exc} (HERDER_DEBUG=1 shows the traceback)")
        sys.exit(EXIT_FAILED)
