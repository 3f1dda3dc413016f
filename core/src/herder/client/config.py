"""The configuration file (TOML), shared by ``herder run`` and ``herder agent``."""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from herder.client.ports import DEFAULT_MAX_PORT, DEFAULT_MIN_PORT, parse_reserved
from herder.credential import default_data_dir
from herder.errors import ConfigError
from herder.sdk.durations import parse_duration
from herder.services import check_backend

DEFAULT_MAX_KILL_TIMEOUT = 30.0
DEFAULT_USER_DENYLIST = ("root",)
DEFAULT_USER_CHECKED_DRIVERS = ("exec", "java", "qemu")
DEFAULT_GC_INTERVAL = 60.0
DEFAULT_GC_MAX_ALLOCS = 50
DEFAULT_GC_DISK_USAGE_THRESHOLD = 80.0
DEFAULT_JOB_GC_THRESHOLD = 4 * 3600.0
DEFAULT_COLLECTION_INTERVAL = 1.0
DEFAULT_BRIDGE_NAME = "nomad"
DEFAULT_BRIDGE_SUBNET = "172.26.64.0/20"
DEFAULT_CNI_PATH = "/opt/cni/bin:/usr/lib/cni"
"""Nomad's default, then where Debian's containernetworking-plugins installs the plugins."""
DEFAULT_CNI_CONFIG_DIR = "/opt/cni/config"


@dataclass(frozen=True)
class PortsConfig:
    """Where dynamic ports come from. ``host_ip`` is the address tasks bind."""

    min: int = DEFAULT_MIN_PORT
    max: int = DEFAULT_MAX_PORT
    reserved: frozenset[int] = frozenset()
    host_ip: str = "127.0.0.1"


@dataclass(frozen=True)
class TlsConfig:
    """The agent's HTTPS (``[tls]``): a certificate (chain) and its key, PEM
    files. Without them the agent serves plain HTTP."""

    cert_file: Path | None = None
    key_file: Path | None = None


@dataclass(frozen=True)
class TelemetryConfig:
    """``[telemetry]``, as Nomad's: ``collection_interval`` is the time between two samples of a
    running task's resource usage, which its stats and the metrics show (:mod:`herder.client.stats`)."""

    collection_interval: float = DEFAULT_COLLECTION_INTERVAL


@dataclass(frozen=True)
class NomadApiConfig:
    """``[nomad_api]``: the listener serving a subset of Nomad's HTTP API (SPEC §17), so that the
    ``nomad`` command line drives the agent. Off (``bind`` empty) unless configured."""

    bind: str = ""


@dataclass(frozen=True)
class AgentConfig:
    """``[agent]``: how the agent's listeners may be reached.

    - ``allowed_hosts``: names, besides loopback and the bind address, that a request's ``Host`` may
      give (herder.agent.samesite).
    - ``insecure_no_token``: a loopback agent without a ``token`` takes requests without one (by
      default it makes one: :mod:`herder.agent.credential`).
    """

    allowed_hosts: frozenset[str] = frozenset()
    insecure_no_token: bool = False


def parse_bind(bind: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) -> host and port; :class:`ValueError` if malformed."""
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bind address {bind!r}: expected HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


@dataclass(frozen=True)
class HostVolumeConfig:
    """``[client.host_volume.NAME]``, as Nomad's ``client { host_volume "NAME" { ... } }``: a
    directory (or file) of the host that jobs may mount by ``NAME``. The path is the operator's: a
    link in it is followed. ``create``: herder makes a missing directory (0700, root's) when an
    allocation that mounts it is placed; without it a missing path fails the placement."""

    path: Path
    read_only: bool = False
    create: bool = False


@dataclass(frozen=True)
class ClientConfig:
    """``[client]``: what the client allows the jobs it runs, as Nomad's client options.

    - ``max_kill_timeout``: the longest ``kill_timeout`` and ``shutdown_delay``
      a task gets, whatever its job asks (Nomad's ``max_kill_timeout``).
    - ``user_denylist``: the users a task of a driver in ``user_checked_drivers``
      may not run as (Nomad's ``user.denylist`` and ``user.checked_drivers``).
    - The garbage collection of finished allocations and jobs, as Nomad's
      client and server GC (:mod:`herder.client.gc`): ``gc_interval``,
      ``gc_max_allocs``, ``gc_disk_usage_threshold`` (percent) and
      ``job_gc_threshold``.
    """

    max_kill_timeout: float = DEFAULT_MAX_KILL_TIMEOUT
    user_denylist: frozenset[str] = frozenset(DEFAULT_USER_DENYLIST)
    user_checked_drivers: frozenset[str] = frozenset(DEFAULT_USER_CHECKED_DRIVERS)
    allow_file_outside: bool = False
    """``file()`` in a job file read by the command line may read outside the job
    file's directory (the agent never reads files for a job)."""
    gc_interval: float = DEFAULT_GC_INTERVAL
    """Seconds between two garbage collections of finished allocations."""
    gc_max_allocs: int = DEFAULT_GC_MAX_ALLOCS
    """The allocations kept (running or finished) before finished ones are collected, oldest first."""
    gc_disk_usage_threshold: float = DEFAULT_GC_DISK_USAGE_THRESHOLD
    """The data dir's filesystem usage (percent) above which finished allocations are collected."""
    job_gc_threshold: float = DEFAULT_JOB_GC_THRESHOLD
    """Seconds after its last allocation finished that a finished job is purged."""
    bridge_network_name: str = DEFAULT_BRIDGE_NAME
    """The bridge of ``network { mode = "bridge" }`` allocations (docs/networking.md)."""
    bridge_network_subnet: str = DEFAULT_BRIDGE_SUBNET
    """The IPv4 subnet the bridge's allocations get their addresses from."""
    cni_path: tuple[Path, ...] = tuple(Path(p) for p in DEFAULT_CNI_PATH.split(":"))
    """Where the CNI plugins are looked for, in order."""
    cni_config_dir: Path = Path(DEFAULT_CNI_CONFIG_DIR)
    """Where ``mode = "cni/NAME"`` finds the operator's configuration ``NAME``."""
    node_class: str = ""
    """The node's class (``${node.class}``), as Nomad's ``client { node_class }``."""
    meta: dict[str, str] = field(default_factory=dict)
    """The node's metadata (``${meta.KEY}``), as Nomad's ``client { meta }``."""
    host_volumes: dict[str, HostVolumeConfig] = field(default_factory=dict)
    """The host volumes jobs may mount, by name (``[client.host_volume.NAME]``)."""

    def __post_init__(self) -> None:
        _refuse_nested_volumes(self.host_volumes)


@dataclass(frozen=True)
class Config:
    data_dir: Path
    bind: str = "127.0.0.1:4646"
    token: str = ""
    tls: TlsConfig = field(default_factory=TlsConfig)
    ports: PortsConfig = field(default_factory=PortsConfig)
    services_backend: str = "local"
    consul: dict[str, Any] = field(default_factory=dict)
    disabled_plugins: frozenset[str] = frozenset()
    plugin: dict[str, dict[str, Any]] = field(default_factory=dict)
    client: ClientConfig = field(default_factory=ClientConfig)
    nomad_api: NomadApiConfig = field(default_factory=NomadApiConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    node_name: str = field(default_factory=lambda: os.uname().nodename)
    datacenter: str = "dc1"
    source: Path | None = None
    """The configuration file this was read from, if any."""

    def __post_init__(self) -> None:
        # Every path herder hands to a driver is absolute: a relative bind source,
        # say, is a volume name to Docker.
        object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser().absolute())


# The keys each table may have ("" is the top level); [plugin.NAME] tables are the plugins' own.
_KEYS: dict[str, set[str]] = {
    "": {"data_dir", "bind", "token", "tls", "ports", "services", "consul", "plugins", "plugin", "node_name",
         "datacenter", "client", "nomad_api", "telemetry", "agent"},
    "nomad_api": {"bind"},
    "agent": {"allowed_hosts", "insecure_no_token"},
    "telemetry": {"collection_interval"},
    "tls": {"cert_file", "key_file"},
    "client": {"max_kill_timeout", "user_denylist", "user_checked_drivers", "allow_file_outside", "gc_interval",
               "gc_max_allocs", "gc_disk_usage_threshold", "job_gc_threshold", "bridge_network_name",
               "bridge_network_subnet", "cni_path", "cni_config_dir", "node_class", "meta", "host_volume"},
    "ports": {"min", "max", "reserved", "host_ip"},
    "services": {"backend"},
    "consul": {"address", "token", "grpc_address"},
    "plugins": {"disabled"},
}


def _table(raw: dict[str, Any], name: str) -> dict[str, Any]:
    value = raw.get(name, {}) if name else raw
    if not isinstance(value, dict):
        raise ConfigError(f"[{name}] must be a table")
    unknown = sorted(set(value) - _KEYS[name])
    if unknown:
        where = f"[{name}]" if name else "top level"
        raise ConfigError(f"unknown key(s) at {where}: {', '.join(unknown)}")
    return value


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(exc)) from None


def _names(table: dict[str, Any], key: str, default: tuple[str, ...], where: str = "client") -> frozenset[str]:
    value = table.get(key, list(default))
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ConfigError(f"[{where}] {key} must be a list of names, not {value!r}")
    return frozenset(value)


def _duration(table: dict[str, Any], key: str, default: float, where: str = "client") -> float:
    try:
        return parse_duration(table.get(key, default))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"[{where}] {key} {exc}") from None


def _number(table: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    """A number of the table between ``low`` and ``high`` (both included)."""
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f"[client] {key} must be a number from {low:g} to {high:g}, not {value!r}")
    return value


def _client(raw: dict[str, Any]) -> ClientConfig:
    table = _table(raw, "client")
    allow_file_outside = table.get("allow_file_outside", False)
    if not isinstance(allow_file_outside, bool):
        raise ConfigError("[client] allow_file_outside must be true or false")
    gc_interval = _duration(table, "gc_interval", DEFAULT_GC_INTERVAL)
    if gc_interval <= 0:
        raise ConfigError("[client] gc_interval must be longer than 0s")
    gc_max_allocs = _number(table, "gc_max_allocs", DEFAULT_GC_MAX_ALLOCS, 0, 2**31)
    if not isinstance(gc_max_allocs, int):
        raise ConfigError(f"[client] gc_max_allocs must be a whole number, not {gc_max_allocs!r}")
    node_class = table.get("node_class", "")
    if not isinstance(node_class, str):
        raise ConfigError(f"[client] node_class must be a string, not {node_class!r}")
    return ClientConfig(max_kill_timeout=_duration(table, "max_kill_timeout", DEFAULT_MAX_KILL_TIMEOUT),
                        allow_file_outside=allow_file_outside,
                        user_denylist=_names(table, "user_denylist", DEFAULT_USER_DENYLIST),
                        user_checked_drivers=_names(table, "user_checked_drivers", DEFAULT_USER_CHECKED_DRIVERS),
                        gc_interval=gc_interval, gc_max_allocs=gc_max_allocs,
                        gc_disk_usage_threshold=float(_number(table, "gc_disk_usage_threshold",
                                                              DEFAULT_GC_DISK_USAGE_THRESHOLD, 0, 100)),
                        job_gc_threshold=_duration(table, "job_gc_threshold", DEFAULT_JOB_GC_THRESHOLD),
                        node_class=node_class, meta=_meta(table), **_networking(table),
                        host_volumes=_host_volumes(table.get("host_volume", {})))


def _networking(table: dict[str, Any]) -> dict[str, Any]:
    """The ``[client]`` keys of the allocations' networks, as Nomad's (checked here, not at the first
    bridge-mode allocation)."""
    values = {key: table.get(key, default) for key, default in (
        ("bridge_network_name", DEFAULT_BRIDGE_NAME), ("bridge_network_subnet", DEFAULT_BRIDGE_SUBNET),
        ("cni_path", DEFAULT_CNI_PATH), ("cni_config_dir", DEFAULT_CNI_CONFIG_DIR))}
    for key, value in values.items():
        if not isinstance(value, str) or not value:
            raise ConfigError(f"[client] {key} must be a non-empty string, not {value!r}")
    name = values["bridge_network_name"]
    if len(name) > 15 or not all(c.isalnum() or c in "-_." for c in name):
        raise ConfigError(f"[client] bridge_network_name {name!r} is not an interface name "
                          "(at most 15 letters, digits, '-', '_' or '.')")
    try:
        subnet = ipaddress.IPv4Network(values["bridge_network_subnet"])
    except ValueError as exc:
        raise ConfigError(f"[client] bridge_network_subnet: {exc}") from None
    if subnet.prefixlen > 30:
        raise ConfigError(f"[client] bridge_network_subnet {subnet} is too small for a gateway and allocations")
    return {"bridge_network_name": name, "bridge_network_subnet": str(subnet),
            "cni_path": tuple(Path(p) for p in values["cni_path"].split(":") if p),
            "cni_config_dir": Path(values["cni_config_dir"])}


def _meta(table: dict[str, Any]) -> dict[str, str]:
    """``[client] meta``: names to strings (numbers and booleans written as Nomad's HCL would)."""
    meta = table.get("meta", {})
    if not isinstance(meta, dict):
        raise ConfigError("[client] meta must be a table of names to values")
    out: dict[str, str] = {}
    for key, value in meta.items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            out[key] = str(value)
        else:
            raise ConfigError(f"[client] meta.{key} must be a string, number or boolean, not {value!r}")
    return out


_HOST_VOLUME_KEYS = {"path", "read_only", "create"}


def _host_volumes(raw: Any) -> dict[str, HostVolumeConfig]:
    """``[client.host_volume.NAME]`` tables: an absolute ``path`` each, the flags true or false."""
    if not isinstance(raw, dict) or not all(isinstance(table, dict) for table in raw.values()):
        raise ConfigError("[client.host_volume.NAME] entries must be tables")
    volumes: dict[str, HostVolumeConfig] = {}
    for name, table in raw.items():
        where = f"[client.host_volume.{name}]"
        unknown = sorted(set(table) - _HOST_VOLUME_KEYS)
        if unknown:
            raise ConfigError(f"unknown key(s) at {where}: {', '.join(unknown)}")
        path = table.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ConfigError(f"{where} path must be an absolute path, not {path!r}")
        flags = {key: table.get(key, False) for key in ("read_only", "create")}
        for key, value in flags.items():
            if not isinstance(value, bool):
                raise ConfigError(f"{where} {key} must be true or false, not {value!r}")
        volumes[name] = HostVolumeConfig(Path(path), **flags)
    return volumes


def _refuse_nested_volumes(volumes: Mapping[str, HostVolumeConfig]) -> None:
    """A host volume inside another that tasks may write is refused: a task mounting the outer one
    could put a link where the inner one's path goes, and the next task mounting the inner one would
    get whatever host directory the link names (``/``), as Docker and runc follow it.

    :raises ConfigError: naming both volumes.
    """
    def spellings(path: Path) -> set[PurePosixPath]:
        return {PurePosixPath(os.path.normpath(path)), PurePosixPath(os.path.realpath(path))}

    for name, volume in volumes.items():
        for outer_name, outer in volumes.items():
            if outer_name == name or outer.read_only:
                continue
            if any(inner != around and inner.is_relative_to(around)
                   for inner in spellings(volume.path) for around in spellings(outer.path)):
                raise ConfigError(f"[client.host_volume.{name}] path {volume.path} is inside host volume "
                                  f"{outer_name!r} ({outer.path}), which tasks may write: a link a task left there "
                                  f"would lead {name!r} anywhere on the host; make {outer_name!r} read_only = true "
                                  "or keep the paths apart")


def _build(raw: dict[str, Any], data_dir: Path | None, agent: bool, disabled: tuple[str, ...],
           source: Path | None) -> Config:
    _table(raw, "")
    ports, plugins, plugin = _table(raw, "ports"), _table(raw, "plugins"), raw.get("plugin", {})
    reserved = ports.get("reserved", "")
    if isinstance(reserved, list):
        reserved = ",".join(str(p) for p in reserved)
    if not isinstance(plugin, dict) or not all(isinstance(t, dict) for t in plugin.values()):
        raise ConfigError("[plugin.NAME] entries must be tables")
    config = Config(
        data_dir=Path(data_dir or raw.get("data_dir") or default_data_dir(agent)),
        bind=str(raw.get("bind", "127.0.0.1:4646")),
        token=str(raw.get("token", "")),
        tls=_tls(_table(raw, "tls")),
        ports=PortsConfig(
            min=int(ports.get("min", DEFAULT_MIN_PORT)),
            max=int(ports.get("max", DEFAULT_MAX_PORT)),
            reserved=frozenset(parse_reserved(str(reserved))),
            host_ip=str(ports.get("host_ip", "127.0.0.1")),
        ),
        services_backend=str(_table(raw, "services").get("backend", "local")),
        consul=dict(_table(raw, "consul")),
        disabled_plugins=frozenset([*plugins.get("disabled", []), *disabled]),
        plugin={str(name): dict(table) for name, table in plugin.items()},
        client=_client(raw),
        nomad_api=_nomad_api(_table(raw, "nomad_api")),
        agent=_agent(_table(raw, "agent")),
        telemetry=_telemetry(_table(raw, "telemetry")),
        node_name=str(raw.get("node_name", os.uname().nodename)),
        datacenter=str(raw.get("datacenter", "dc1")),
        source=source.absolute() if source is not None else None,
    )
    if config.token and config.agent.insecure_no_token:
        raise ConfigError("[agent] insecure_no_token = true with a token: choose one")
    if not 0 < config.ports.min <= config.ports.max <= 65535:
        raise ConfigError("ports.min and ports.max must satisfy 0 < min <= max <= 65535")
    check_backend(config.services_backend)
    return config


def _nomad_api(table: dict[str, Any]) -> NomadApiConfig:
    bind = table.get("bind", "")
    if not isinstance(bind, str):
        raise ConfigError(f"[nomad_api] bind must be a string HOST:PORT, not {bind!r}")
    if bind:
        try:
            parse_bind(bind)
        except ValueError as exc:
            raise ConfigError(f"[nomad_api] {exc}") from None
    return NomadApiConfig(bind)


def _agent(table: dict[str, Any]) -> AgentConfig:
    insecure = table.get("insecure_no_token", False)
    if not isinstance(insecure, bool):
        raise ConfigError("[agent] insecure_no_token must be true or false")
    # Host names are case-insensitive; a request's is compared lowercased.
    return AgentConfig(frozenset(name.lower() for name in _names(table, "allowed_hosts", (), "agent")), insecure)


def _telemetry(table: dict[str, Any]) -> TelemetryConfig:
    interval = _duration(table, "collection_interval", DEFAULT_COLLECTION_INTERVAL, "telemetry")
    if interval <= 0:
        raise ConfigError("[telemetry] collection_interval must be longer than 0s")
    return TelemetryConfig(interval)


def _tls(table: dict[str, Any]) -> TlsConfig:
    cert_file, key_file = table.get("cert_file"), table.get("key_file")
    if bool(cert_file) != bool(key_file):
        raise ConfigError("[tls] cert_file and key_file are set together, or neither")
    if not cert_file:
        return TlsConfig()
    return TlsConfig(Path(str(cert_file)).expanduser().absolute(), Path(str(key_file)).expanduser().absolute())


def load_config(path: Path | None, *, data_dir: Path | None = None, agent: bool = False,
                disabled: tuple[str, ...] = ()) -> Config:
    """Read the TOML file at ``path`` (or use defaults); command-line values win.

    :raises ConfigError: naming the file and what is wrong with it.
    """
    try:
        return _build(_read(path) if path is not None else {}, data_dir, agent, disabled, path)
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConfigError(f"{path or 'configuration'}: {exc}") from None
