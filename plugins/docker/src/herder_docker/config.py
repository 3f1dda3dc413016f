"""The docker driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herder.sdk import parse_duration

DEFAULT_ENDPOINT = "unix:///var/run/docker.sock"

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "image": {"type": "string", "minLength": 1},
        "command": {"type": "string"},
        "args": {"type": "array", "items": {"type": "string"}},
        "entrypoint": {"type": "array", "items": {"type": "string"}},
        "port_map": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 65535}},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "network_mode": {"type": "string"},
        "work_dir": {"type": "string"},
        "hostname": {"type": "string"},
        "dns_servers": {"type": "array", "items": {"type": "string"}},
        "force_pull": {"type": "boolean"},
        "load": {"type": "string", "minLength": 1},
        "volumes": {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:[^:]+(:(ro|rw))?$"}},
        "privileged": {"type": "boolean"},
    },
    "required": ["image"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PluginConfig:
    """``[plugin.docker]``: where the daemon is and what tasks may do."""

    endpoint: str = DEFAULT_ENDPOINT
    cleanup_image: bool = True
    cleanup_image_delay: float = 180.0
    volumes_enabled: bool = False
    allow_privileged: bool = False
    pull_timeout: float = 300.0
    timeout: float = 60.0

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        known = {"endpoint", "cleanup_image", "cleanup_image_delay", "volumes_enabled", "allow_privileged",
                 "pull_timeout", "timeout"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown [plugin.docker] key(s): {', '.join(unknown)}")
        return cls(
            endpoint=str(raw.get("endpoint") or os.environ.get("DOCKER_HOST") or DEFAULT_ENDPOINT),
            cleanup_image=bool(raw.get("cleanup_image", True)),
            cleanup_image_delay=parse_duration(raw.get("cleanup_image_delay", "3m")),
            volumes_enabled=bool(raw.get("volumes_enabled", False)),
            allow_privileged=bool(raw.get("allow_privileged", False)),
            pull_timeout=parse_duration(raw.get("pull_timeout", "5m")),
            timeout=parse_duration(raw.get("timeout", "60s")),
        )


@dataclass(frozen=True)
class TaskConfig:
    """A task's ``config``, after the schema has accepted it."""

    image: str
    command: str = ""
    args: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] | None = None
    port_map: Mapping[str, int] | None = None
    labels: Mapping[str, str] | None = None
    network_mode: str = ""
    work_dir: str = ""
    hostname: str = ""
    dns_servers: tuple[str, ...] = ()
    force_pull: bool = False
    load: str = ""
    volumes: tuple[str, ...] = ()
    privileged: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        tuples = {"args", "entrypoint", "dns_servers", "volumes"}
        values: dict[str, Any] = {key: tuple(value) if key in tuples else value for key, value in raw.items()}
        return cls(**values)

    @property
    def image_ref(self) -> str:
        return image_ref(self.image)


def image_ref(name: str) -> str:
    """The image with a tag, as Docker names it (``busybox`` -> ``busybox:latest``)."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last or "@" in last else f"{name}:latest"
