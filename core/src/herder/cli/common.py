"""What every ``herder`` command shares: exit codes, messages, job-variable options, event lines.

Only :mod:`click` and the standard library: every command imports this, and
most of them must start in a few tens of milliseconds.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, NoReturn, TypeVar

import click

from herder.cli.terminal import printable

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
"""Success; a task or a request failed; invalid input (a job, the configuration, an option)."""

F = TypeVar("F", bound=Callable[..., Any])


def say(text: str) -> None:
    """A message for the user, on stderr."""
    click.echo(text, err=True)


def fail(text: str, code: int = EXIT_FAILED) -> NoReturn:
    """``Error: text`` on stderr, and exit ``code``."""
    say(f"Error: {text}")
    sys.exit(code)


def invalid(heading: str, errors: list[str]) -> NoReturn:
    """``Error: heading:`` and each problem on a line of its own; exit 2."""
    say(f"Error: {heading}:")
    for error in errors:
        say(f"  * {error}")
    sys.exit(EXIT_INVALID)


def variable_options(func: F) -> F:
    """``--var KEY=VALUE`` (``variables``) and ``--var-file FILE`` (``var_files``), both repeatable."""
    func = click.option("--var-file", "var_files", multiple=True, type=click.Path(path_type=Path), metavar="FILE",
                        help="Set job variables from an .hcl or .json file (repeatable; --var wins).")(func)
    func = click.option("--var", "variables", multiple=True, metavar="KEY=VALUE", help="Set a job variable.")(func)
    return func


def meta_option(func: F) -> F:
    """``-meta KEY=VALUE`` / ``--meta KEY=VALUE`` (``meta``, a mapping), repeatable, as Nomad's ``job dispatch``."""
    def parse(ctx: click.Context, param: click.Parameter, items: tuple[str, ...]) -> dict[str, str]:
        meta: dict[str, str] = {}
        for item in items:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise click.BadParameter(f"{item!r}: expected KEY=VALUE", ctx, param)
            meta[key] = value
        return meta

    return click.option("-meta", "--meta", "meta", multiple=True, metavar="KEY=VALUE", callback=parse,
                        help="Set a meta key of the dispatched job (repeatable).")(func)


def read_payload(file: BinaryIO | None, limit: int) -> bytes:
    """The payload in ``file`` (an opened ``PAYLOAD_FILE``, ``-`` for stdin), at most ``limit``
    bytes: a larger one is refused here, as the agent would, without sending it."""
    if file is None:
        return b""
    payload = file.read(limit + 1)
    if len(payload) > limit:
        fail(f"the payload {file.name}: larger than the {limit} bytes (16 KiB) a dispatch may carry")
    return payload


def event_line(event: Mapping[str, Any]) -> str:
    """A task event (in the documented JSON shape) as one line: time, allocation, task, type: message."""
    message = f": {printable(event['message'])}" if event.get("message") else ""  # the job's text, maybe
    return f"{event['time']} {event['alloc_name']} {event['task']} {event['type']}{message}"
