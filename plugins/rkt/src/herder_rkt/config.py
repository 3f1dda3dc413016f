"""The rkt driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herder.sdk import parse_duration

INSECURE_OPTIONS = ("none", "image", "tls", "ondisk", "http", "pubkey", "capabilities", "paths", "seccomp",
                    "all-fetch", "all-run", "all")
"""What rkt 1.30's ``--insecure-options`` accepts."""

_STRINGS = {"type": "array", "items": {"type": "string", "minLength": 1}}

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "image": {"type": "string", "minLength": 1},
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "trust_prefix": {"type": "string", "minLength": 1},
        "insecure_options": {"type": "array", "items": {"enum": list(INSECURE_OPTIONS)}},
        "dns_servers": _STRINGS,
        "dns_search_domains": _STRINGS,
        "net": _STRINGS,
        # label -> the name of a port in the image's manifest (``8080-tcp``)
        "port_map": {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}},
        "volumes": {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:/[^:]*(:(ro|rw))?$"}},
        "debug": {"type": "boolean"},
    },
    "required": ["image"],
    "additionalProperties": False,
}

DEFAULT_START_TIMEOUT = 5.0
PLUGIN_KEYS = frozenset({"rkt", "stage1_path", "stage1_name", "volumes_enabled", "allow_insecure", "start_timeout",
                         "dir", "local_config", "system_config"})


@dataclass(frozen=True)
class PluginConfig:
    """``[plugin.rkt]``."""

    rkt: str = "rkt"
    """The rkt binary: a path, or a name looked up on PATH."""
    stage1_path: str = ""
    """``rkt run --stage1-path``: the stage1 image file; empty: rkt's default (or ``stage1_name``)."""
    stage1_name: str = ""
    """``rkt run --stage1-name``: a stage1 image by name, from rkt's store."""
    volumes_enabled: bool = False
    """Whether tasks may mount host paths with ``volumes``."""
    allow_insecure: bool = False
    """Whether tasks may give ``insecure_options``: run unsigned images, skip TLS, or drop the pod's
    capability, path and seccomp restrictions (``all-run``)."""
    start_timeout: float = DEFAULT_START_TIMEOUT
    """How long ``rkt run`` has to write the pod's UUID; past it the pod is killed and the start retried."""
    dir: str = ""
    local_config: str = ""
    system_config: str = ""
    """rkt's global ``--dir``, ``--local-config`` and ``--system-config``; empty: rkt's defaults
    (``/var/lib/rkt``, ``/etc/rkt``, ``/usr/lib/rkt``)."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        """:raises ValueError: an unknown key or a value of the wrong kind (herder reports the plugin as failed)."""
        unknown = sorted(set(raw) - PLUGIN_KEYS)
        if unknown:
            raise ValueError(f"unknown [plugin.rkt] key(s): {', '.join(unknown)}")
        strings = {key: raw.get(key, "") for key in ("rkt", "stage1_path", "stage1_name", "dir", "local_config",
                                                      "system_config")}
        for key, value in strings.items():
            if not isinstance(value, str):
                raise ValueError(f"[plugin.rkt] {key} must be a string, not {value!r}")
        if strings["stage1_path"] and strings["stage1_name"]:
            raise ValueError("[plugin.rkt] stage1_path and stage1_name exclude each other: give one")
        flags = {key: raw.get(key, False) for key in ("volumes_enabled", "allow_insecure")}
        for key, value in flags.items():
            if not isinstance(value, bool):
                raise ValueError(f"[plugin.rkt] {key} must be true or false, not {value!r}")
        try:
            start_timeout = parse_duration(raw.get("start_timeout", DEFAULT_START_TIMEOUT))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"[plugin.rkt] start_timeout {exc}") from None
        if start_timeout <= 0:
            raise ValueError("[plugin.rkt] start_timeout must be longer than 0s")
        return cls(rkt=strings["rkt"] or "rkt", stage1_path=strings["stage1_path"],
                   stage1_name=strings["stage1_name"], volumes_enabled=flags["volumes_enabled"],
                   allow_insecure=flags["allow_insecure"], start_timeout=start_timeout,
                   dir=strings["dir"], local_config=strings["local_config"], system_config=strings["system_config"])


@dataclass(frozen=True)
class Volume:
    """``host:container[:ro|rw]`` of ``config.volumes``."""

    host: str
    container: str
    read_only: bool

    @classmethod
    def parse(cls, text: str) -> Volume:
        host, container, *mode = text.split(":")
        return cls(host, container, mode == ["ro"])


@dataclass(frozen=True)
class TaskConfig:
    """A task's ``config``, after the schema has accepted it."""

    image: str
    command: str = ""
    args: tuple[str, ...] = ()
    trust_prefix: str = ""
    insecure_options: tuple[str, ...] = ()
    dns_servers: tuple[str, ...] = ()
    dns_search_domains: tuple[str, ...] = ()
    net: tuple[str, ...] = ()
    port_map: Mapping[str, str] | None = None
    volumes: tuple[Volume, ...] = ()
    debug: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        def strings(key: str) -> tuple[str, ...]:
            return tuple(str(item) for item in raw.get(key, ()))

        return cls(image=str(raw["image"]), command=str(raw.get("command", "")), args=strings("args"),
                   trust_prefix=str(raw.get("trust_prefix", "")), insecure_options=strings("insecure_options"),
                   dns_servers=strings("dns_servers"), dns_search_domains=strings("dns_search_domains"),
                   net=strings("net"), port_map=dict(raw.get("port_map") or {}),
                   volumes=tuple(Volume.parse(str(v)) for v in raw.get("volumes", ())), debug=bool(raw.get("debug")))

    @property
    def host_network(self) -> bool:
        """``net = ["host"]``: the pod shares the host's network, the app binds the host ports itself."""
        return list(self.net) == ["host"]
