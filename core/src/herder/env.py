"""The task environment (SPEC §5), and helpers for drivers that adjust it.

Every variable is set twice, as ``HERDER_<NAME>`` and ``NOMAD_<NAME>``, so
that Nomad job files work unchanged. :func:`task_environment` gives the values
as the host sees them; a driver that shows the task something else (an
isolating driver mounts the directories at ``/alloc``, ``/local`` and
``/secrets``; a driver that maps ports has the task listen on another port)
rewrites them with :func:`set_task_dirs` and :func:`set_port_vars`, which keep
both prefixes in step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, MutableMapping, Sequence
from os import PathLike

from herder.context import AllocatedPort, TaskDir
from herder.jobspec.model import Group, Job, Task

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
    cleaned = _INVALID_CHAR.sub(lambda m: "_" * len(m.group().encode()), name)
    if cleaned[:1].isdigit():
        cleaned = "_" + cleaned[1:]
    return cleaned


def set_var(env: MutableMapping[str, str], name: str, value: str) -> None:
    """Set ``HERDER_<name>`` and ``NOMAD_<name>`` (``name`` is cleaned)."""
    for prefix in PREFIXES:
        env[clean_env_var(prefix + name)] = value


def get_var(env: Mapping[str, str], name: str) -> str | None:
    """The value of ``HERDER_<name>`` (or else ``NOMAD_<name>``), if set."""
    for prefix in PREFIXES:
        value = env.get(clean_env_var(prefix + name))
        if value is not None:
            return value
    return None


def set_port_vars(
    env: MutableMapping[str, str], label: str, port: int, ip: str | None = None
) -> None:
    """Set ``PORT_<label>`` to the port the task listens on, and ``ADDR_<label>``.

    ``ADDR_<label>`` is ``ip:port``, where ``ip`` defaults to the
    ``IP_<label>`` already in ``env`` (the host IP). ``HOST_PORT_<label>`` is
    left alone.
    """
    address = ip or get_var(env, f"IP_{label}") or "127.0.0.1"
    set_var(env, f"PORT_{label}", str(port))
    set_var(env, f"ADDR_{label}", f"[{address}]:{port}" if ":" in address else f"{address}:{port}")


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


def task_environment(
    *,
    job: Job,
    group: Group,
    task: Task,
    alloc_id: str,
    alloc_index: int,
    task_dir: TaskDir,
    ports: Sequence[AllocatedPort],
    datacenter: str,
) -> dict[str, str]:
    """herder's variables for ``task``, with host paths and host ports.

    The task's own ``env`` is not included: the runner interpolates it
    against these variables (and ``${attr.*}``, ``${meta.*}``, ...) at each
    start and applies it last.
    """
    env: dict[str, str] = {}
    set_task_dirs(env, task_dir.alloc_dir, task_dir.local_dir, task_dir.secrets_dir)
    set_var(env, "ALLOC_ID", alloc_id)
    set_var(env, "ALLOC_NAME", f"{job.name}.{group.name}[{alloc_index}]")
    set_var(env, "ALLOC_INDEX", str(alloc_index))
    set_var(env, "JOB_NAME", job.name)
    set_var(env, "GROUP_NAME", group.name)
    set_var(env, "TASK_NAME", task.name)
    set_var(env, "DC", datacenter)
    set_var(env, "REGION", job.region)
    set_var(env, "CPU_LIMIT", str(task.resources.cpu))
    set_var(env, "MEMORY_LIMIT", str(task.resources.memory))
    for port in ports:
        set_var(env, f"IP_{port.label}", port.host_ip)
        set_var(env, f"HOST_PORT_{port.label}", str(port.value))
        set_port_vars(env, port.label, port.value)
    for key, value in {**job.meta, **group.meta, **task.meta}.items():
        # As Nomad: upper-cased, and as written for job files that use that.
        set_var(env, f"META_{key}", value)
        set_var(env, f"META_{clean_env_var(key).upper()}", value)
    return env


def inherited_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment without its secrets, for drivers that pass it on (raw_exec)."""
    return {
        name: value
        for name, value in environ.items()
        if name.upper() not in SECRET_VARIABLES and not _AWS_SECRET.fullmatch(name.upper())
    }
