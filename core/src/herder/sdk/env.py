"""Helpers for drivers that adjust the task environment.

Every variable is set twice, as ``HERDER_<NAME>`` and ``NOMAD_<NAME>``, so
that Nomad job files work unchanged. The client builds the environment as the
host sees it; a driver that shows the task something else (an isolating
driver mounts the directories at ``/alloc``, ``/local`` and ``/secrets``; a
driver that maps ports has the task listen on another port) rewrites it with
:func:`set_task_dirs` and :func:`set_port_vars`, which keep both prefixes in
step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping
from functools import lru_cache
from os import PathLike

PREFIXES = ("HERDER_", "NOMAD_")

SECRET_VARIABLES = frozenset(
    {
        "CONSUL_HTTP_AUTH",
        "CONSUL_HTTP_TOKEN",
        "CONSUL_TOKEN",
        "HERDER_TOKEN",
        "NOMAD_TOKEN",
        "VAULT_TOKEN",
    }
)
"""Agent variables a task never inherits (AWS credentials are dropped too)."""

_AWS_SECRET = re.compile(r"AWS_\w*(KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL)\w*")
_INVALID_CHAR = re.compile(r"[^A-Za-z0-9_]")


def clean_env_var(name: str) -> str:
    """Make ``name`` a valid variable name, as Nomad's ``helper.CleanEnvVar`` does.

    Every byte other than ASCII letters, digits and ``_`` becomes ``_`` (so
    a two-byte UTF-8 character gives two), and so does a leading digit:
    ``http-admin`` gives ``http_admin``.
    """
    cleaned = _clean_bytes(name)
    if cleaned[:1].isdigit():
        cleaned = "_" + cleaned[1:]
    return cleaned


@lru_cache(maxsize=4096)
def _clean_bytes(name: str) -> str:
    """``name`` with every byte other than ASCII letters, digits and ``_`` made ``_``.

    Cached: every task's environment cleans the same few dozen names.
    """
    return _INVALID_CHAR.sub(lambda m: "_" * len(m.group().encode()), name)


def set_var(env: MutableMapping[str, str], name: str, value: str) -> None:
    """Set ``HERDER_<name>`` and ``NOMAD_<name>`` (``name`` is cleaned)."""
    # The prefixes are valid and start with a letter: cleaning ``prefix + name``
    # only ever changes the name's bytes, never its first character's rule.
    cleaned = _clean_bytes(name)
    for prefix in PREFIXES:
        env[prefix + cleaned] = value


def get_var(env: Mapping[str, str], name: str) -> str | None:
    """The value of ``HERDER_<name>`` (or else ``NOMAD_<name>``), if set."""
    cleaned = _clean_bytes(name)
    for prefix in PREFIXES:
        value = env.get(prefix + cleaned)
        if value is not None:
            return value
    return None


def set_port_vars(env: MutableMapping[str, str], label: str, port: int) -> None:
    """Set ``PORT_<label>``: the port the task listens on, for a driver that maps
    ports (a container listening on ``port``, reached through the host port).

    ``ADDR_<label>`` and ``HOST_PORT_<label>`` are left alone: they name the
    host's address and port, the ones that reach the task from outside.
    """
    set_var(env, f"PORT_{label}", str(port))


def set_task_dirs(
    env: MutableMapping[str, str],
    alloc_dir: str | PathLike[str],
    task_dir: str | PathLike[str],
    secrets_dir: str | PathLike[str],
) -> None:
    """Set ``ALLOC_DIR``, ``TASK_DIR`` (the task's ``local`` dir) and ``SECRETS_DIR``."""
    set_var(env, "ALLOC_DIR", str(alloc_dir))
    set_var(env, "TASK_DIR", str(task_dir))
    set_var(env, "SECRETS_DIR", str(secrets_dir))


def inherited_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment without its secrets, for drivers that pass it on (raw_exec)."""
    return {
        name: value
        for name, value in environ.items()
        if name.upper() not in SECRET_VARIABLES and not _AWS_SECRET.fullmatch(name.upper())
    }
