"""``herder agent``: the daemon, in this process."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import click

from herder import app
from herder.agent import daemon
from herder.cli.local import configuration, plugin_options


@click.command()
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
    config = app.agent_config(configuration(config_path, data_dir, disabled, agent=True))
    if bind:
        config = dataclasses.replace(config, bind=bind)
    sys.exit(daemon.run(config, drain=drain))
