"""The docker driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from herder.sdk import parse_duration

DEFAULT_ENDPOINT = "unix:///var/run/docker.sock"
DEFAULT_INFRA_IMAGE = "gcr.io/google_containers/pause-amd64:3.1"
"""Nomad's default ``infra_image``: the image of the pause container that owns an allocation's network."""

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
        # Nomad 1.x keys
        "ports": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "auth": {
            "type": "object",
            "additionalProperties": False,
            "properties": {key: {"type": "string"} for key in ("username", "password", "email", "server_address")},
        },
        "auth_soft_fail": {"type": "boolean"},
        "memory_hard_limit": {"type": "integer", "minimum": 1},
        "mount": {"oneOf": [{"$ref": "#/$defs/mount"}, {"type": "array", "items": {"$ref": "#/$defs/mount"}}]},
        # Nomad's older spelling of ``mount``: a list of the same maps (``mounts = [{ ... }]``)
        "mounts": {"type": "array", "items": {"$ref": "#/$defs/mount"}},
        "cap_add": {"type": "array", "items": {"type": "string"}},
        "cap_drop": {"type": "array", "items": {"type": "string"}},
        "extra_hosts": {"type": "array", "items": {"type": "string", "pattern": "^[^:]+:.+$"}},
        "init": {"type": "boolean"},
        "ulimit": {
            "type": "object",
            "additionalProperties": {"type": ["string", "integer"], "pattern": "^[0-9]+(:[0-9]+)?$"},
        },
        "shm_size": {"type": "integer", "minimum": 0},
        "sysctl": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
        "logging": {"type": "object"},
        **{key: True for key in sorted({
            "advertise_ipv6_address", "container_exists_attempts", "cpu_cfs_period", "cpu_hard_limit",
            "cpuset_cpus", "devices", "dns_options", "dns_search_domains", "group_add", "healthchecks",
            "image_pull_timeout", "interactive", "ipc_mode", "ipv4_address", "ipv6_address", "isolation",
            "mac_address", "network_aliases", "oom_score_adj", "pid_mode", "pids_limit", "readonly_rootfs",
            "runtime", "security_opt", "storage_opt", "tty", "userns_mode", "uts_mode",
        })},
    },
    "required": ["image"],
    "additionalProperties": False,
    "$defs": {
        "mount": {
            "type": "object",
            "additionalProperties": False,
            "required": ["target"],
            "properties": {
                "type": {"enum": ["bind", "volume", "tmpfs"]},
                "target": {"type": "string", "minLength": 1},
                "source": {"type": "string"},
                "readonly": {"type": "boolean"},
                "bind_options": {"type": "object"},
                "volume_options": {"type": "object"},
                "tmpfs_options": {"type": "object"},
            },
        },
    },
}

IGNORED_KEYS = frozenset(key for key, schema in TASK_SCHEMA["properties"].items() if schema is True) | {"logging"}
"""Nomad docker keys accepted and ignored, with a warning (``logging``: herder collects the logs itself)."""

DEFAULT_ALLOW_CAPS = (
    "audit_write", "chown", "dac_override", "fowner", "fsetid", "kill", "mknod", "net_bind_service",
    "setfcap", "setgid", "setpcap", "setuid", "sys_chroot",
)
"""Nomad's default ``allow_caps``: the capabilities a container may have (Docker's defaults but ``net_raw``)."""
DOCKER_DEFAULT_CAPS = (*DEFAULT_ALLOW_CAPS, "net_raw")
"""The capabilities Docker gives a container unless told otherwise, as Nomad counts them.

``net_raw`` lets a container open raw and packet sockets: on the host's network it could read
the traffic of every process of the host (an API token on loopback, say), on a bridge forge
its neighbours' packets. Nomad 1.1 took it out of ``allow_caps``'s default, and so has herder.
"""
HOST_NETWORK = "host"
CONTAINER_NETWORK_PREFIX = "container:"


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
    allow_caps: tuple[str, ...] = DEFAULT_ALLOW_CAPS
    allow_sysctl: bool = False
    allow_host_network: bool = False
    allow_container_network: bool = False
    infra_image: str = DEFAULT_INFRA_IMAGE
    infra_image_pull_timeout: float = 300.0

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        known = {"endpoint", "cleanup_image", "cleanup_image_delay", "volumes_enabled", "allow_privileged",
                 "pull_timeout", "timeout", "allow_caps", "allow_sysctl", "allow_host_network",
                 "allow_container_network", "infra_image", "infra_image_pull_timeout"}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ValueError(f"unknown [plugin.docker] key(s): {', '.join(unknown)}")
        allow_caps = raw.get("allow_caps", DEFAULT_ALLOW_CAPS)
        if not isinstance(allow_caps, list | tuple):
            raise ValueError(f"[plugin.docker] allow_caps must be a list of capability names, not {allow_caps!r}")
        infra_image = raw.get("infra_image", DEFAULT_INFRA_IMAGE)
        if not isinstance(infra_image, str) or not infra_image.strip():
            raise ValueError(f"[plugin.docker] infra_image must be an image name, not {infra_image!r}")
        return cls(
            endpoint=str(raw.get("endpoint") or os.environ.get("DOCKER_HOST") or DEFAULT_ENDPOINT),
            cleanup_image=bool(raw.get("cleanup_image", True)),
            cleanup_image_delay=parse_duration(raw.get("cleanup_image_delay", "3m")),
            volumes_enabled=bool(raw.get("volumes_enabled", False)),
            allow_privileged=bool(raw.get("allow_privileged", False)),
            pull_timeout=parse_duration(raw.get("pull_timeout", "5m")),
            timeout=parse_duration(raw.get("timeout", "60s")),
            allow_caps=tuple(capability(cap) for cap in allow_caps),
            allow_sysctl=bool(raw.get("allow_sysctl", False)),
            allow_host_network=bool(raw.get("allow_host_network", False)),
            allow_container_network=bool(raw.get("allow_container_network", False)),
            infra_image=image_ref(infra_image.strip()),
            infra_image_pull_timeout=parse_duration(raw.get("infra_image_pull_timeout", "5m")),
        )

    def capabilities(self, add: Sequence[str], drop: Sequence[str]) -> tuple[list[str], list[str]]:
        """The container's ``cap_add`` and ``cap_drop``, as Nomad's docker driver computes them:
        ``add`` as asked, and dropped what ``drop`` asks for plus each of Docker's default
        capabilities ``allow_caps`` leaves out (``all`` in ``allow_caps`` allows every one).

        :raises ValueError: ``add`` asks for a capability ``allow_caps`` does not allow.
        """
        allowed = set(self.allow_caps)
        refused = [cap for cap in add if "all" not in allowed and capability(cap) not in allowed]
        if refused:
            raise ValueError(f"cap_add: {', '.join(refused)} not allowed: see [plugin.docker] allow_caps")
        dropped = {capability(cap) for cap in drop}
        if "all" in dropped:
            return _docker_names(add), ["ALL"]
        if "all" not in allowed:
            dropped |= set(DOCKER_DEFAULT_CAPS) - allowed
        return _docker_names(add), _docker_names(dropped)

    def network_mode_refusal(self, mode: str) -> str | None:
        """Why ``network_mode`` is refused by this configuration, or None: the host's network
        and another container's are each allowed only where the operator says so."""
        if mode == HOST_NETWORK and not self.allow_host_network:
            return ('config.network_mode = "host" is not allowed: a container on the host\'s network reaches '
                    "every service the host listens on, loopback included; "
                    "set [plugin.docker] allow_host_network = true")
        if mode.startswith(CONTAINER_NETWORK_PREFIX) and not self.allow_container_network:
            return (f"config.network_mode = \"{mode}\" is not allowed: it joins another container's network, "
                    "which may be another allocation's; set [plugin.docker] allow_container_network = true")
        return None


def capability(name: str) -> str:
    """A capability as Nomad compares them: lower case, without ``CAP_``."""
    return str(name).strip().lower().removeprefix("cap_")


def _docker_names(caps: Iterable[str]) -> list[str]:
    """Capabilities as Docker's API takes them (``NET_RAW``), sorted, each once."""
    return sorted({capability(cap).upper() for cap in caps})


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
    ports: tuple[str, ...] | None = None
    auth: Mapping[str, str] | None = None
    auth_soft_fail: bool = False
    memory_hard_limit: int = 0
    mount: tuple[Mapping[str, Any], ...] = ()
    cap_add: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    extra_hosts: tuple[str, ...] = ()
    init: bool = False
    ulimit: Mapping[str, str | int] | None = None
    shm_size: int = 0
    sysctl: Mapping[str, str | int | float] | None = None
    ignored: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        """The config as the schema accepted it; keys herder ignores are named in ``ignored``."""
        tuples = {"args", "entrypoint", "dns_servers", "volumes", "ports", "cap_add", "cap_drop", "extra_hosts"}
        values: dict[str, Any] = {key: tuple(value) if key in tuples else value
                                  for key, value in raw.items() if key not in IGNORED_KEYS}
        if "mount" in values:  # one mount block is a map, several a list (HCL's repeated blocks)
            mounts = values["mount"]
            values["mount"] = (mounts,) if isinstance(mounts, Mapping) else tuple(mounts)
        values["mount"] = (*values.get("mount", ()), *values.pop("mounts", ()))
        return cls(**values, ignored=tuple(sorted(IGNORED_KEYS & set(raw))))

    @property
    def image_ref(self) -> str:
        return image_ref(self.image)


def image_ref(name: str) -> str:
    """The image with a tag, as Docker names it (``busybox`` -> ``busybox:latest``)."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last or "@" in last else f"{name}:latest"
