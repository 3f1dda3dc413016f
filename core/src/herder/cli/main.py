"""The ``herder`` command line: arguments in, :mod:`herder.app` use cases, output out.

A command's module is imported when that command runs (:class:`LazyGroup`):
``herder job status`` loads neither the client, the plugins nor the agent,
and starts in tens of milliseconds.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from herder import __version__
from herder.cli.common import EXIT_FAILED, say

COMMANDS = {
    "run": "herder.cli.local:run",
    "validate": "herder.cli.local:validate",
    "drivers": "herder.cli.local:drivers",
    "node": "herder.cli.local:node",
    "plugins": "herder.cli.local:plugins",
    "reap": "herder.cli.local:reap",
    "agent": "herder.cli.serve:agent",
    "job": "herder.cli.rollouts:job",
    "deployment": "herder.cli.rollouts:deployment",
    "alloc": "herder.cli.remote:alloc",
    "system": "herder.cli.remote:system",
    "service": "herder.cli.services:service",
}
"""Every command, and where it is defined."""


class LazyGroup(click.Group):
    """A group whose commands (``name -> "module:attribute"``) are imported when they are used."""

    def __init__(self, *args: Any, commands_at: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands_at = commands_at

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands_at)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = self.commands_at.get(cmd_name)
        if where is None:
            return None
        module, _, attribute = where.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


@click.group(cls=LazyGroup, commands_at=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__)
def cli() -> None:
    """Run tasks on this host through pluggable drivers."""


def main() -> None:
    """The console script: a bug of herder's is one line, unless HERDER_DEBUG=1 asks for the traceback."""
    try:
        cli()
    except Exception as exc:
        if _state_error(exc):  # the host's fault (a full disk...), not a bug of herder's
            say(f"herder: {exc}")
            sys.exit(EXIT_FAILED)
        if os.environ.get("HERDER_DEBUG") == "1":
            raise
        say(f"herder: internal error: {type(exc).__name__}: {exc} (HERDER_DEBUG=1 shows the traceback)")
        sys.exit(EXIT_FAILED)


def _state_error(exc: Exception) -> bool:
    """Whether ``exc`` is the state database failing. Only a command that opened the state can have
    raised one, and only it has imported the state module: a command that did not is not made to."""
    store = sys.modules.get("herder.state.database")
    return store is not None and isinstance(exc, store.StateError)
