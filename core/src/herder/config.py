"""The configuration file (TOML), shared by ``herder run`` and ``herder agent``."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from herder.errors import ConfigError


@dataclass(frozen=True)
class PortsConfig:
    """Where dynamic ports come from. ``host_ip`` is the address tasks bind."""

    min: int = 20000
    max: int = 32000
    reserved: str = ""
    host_ip: str = "127.0.0.1"


@dataclass(frozen=True)
class Config:
    data_dir: Path
    bind: str = "127.0.0.1:4646"
    token: str = ""
    ports: PortsConfig = field(default_factory=PortsConfig)
    services_backend: str = "local"
    consul: dict[str, Any] = field(default_factory=dict)
    disabled_plugins: frozenset[str] = frozenset()
    plugin: dict[str, dict[str, Any]] = field(default_factory=dict)
    node_name: str = field(default_factory=lambda: os.uname().nodename)
    datacenter: str = "dc1"

    def plugin_config(self, name: str) -> dict[str, Any]:
        """The ``[plugin.NAME]`` table, ``{}`` when absent."""
        return dict(self.plugin.get(name, {}))


def default_data_dir(agent: bool = False) -> Path:
    """``/var/lib/herder`` for the agent as root, else ``$XDG_DATA_HOME/herder``."""
    if agent and os.geteuid() == 0:
        return Path("/var/lib/herder")
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "herder"


_KNOWN = {"data_dir", "bind", "token", "ports", "services", "consul", "plugins", "plugin", "node_name", "datacenter"}


def load_config(path: Path | None, *, data_dir: Path | None = None, agent: bool = False,
                disabled: tuple[str, ...] = ()) -> Config:
    """Read the TOML file at ``path`` (or use defaults); command-line values win."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    unknown = sorted(set(raw) - _KNOWN)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s): {', '.join(unknown)}")
    try:
        ports_raw = dict(raw.get("ports", {}))
        reserved = ports_raw.get("reserved", "")
        if isinstance(reserved, list):
            reserved = ",".join(str(p) for p in reserved)
        ports = PortsConfig(
            min=int(ports_raw.get("min", 20000)),
            max=int(ports_raw.get("max", 32000)),
            reserved=str(reserved),
            host_ip=str(ports_raw.get("host_ip", "127.0.0.1")),
        )
        plugins_raw = dict(raw.get("plugins", {}))
        config = Config(
            data_dir=Path(data_dir or raw.get("data_dir") or default_data_dir(agent)),
            bind=str(raw.get("bind", "127.0.0.1:4646")),
            token=str(raw.get("token", "")),
            ports=ports,
            services_backend=str(dict(raw.get("services", {})).get("backend", "local")),
            consul=dict(raw.get("consul", {})),
            disabled_plugins=frozenset([*plugins_raw.get("disabled", []), *disabled]),
            plugin={str(k): dict(v) for k, v in dict(raw.get("plugin", {})).items()},
            node_name=str(raw.get("node_name", os.uname().nodename)),
            datacenter=str(raw.get("datacenter", "dc1")),
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: {exc}") from None
    if not 0 < config.ports.min <= config.ports.max <= 65535:
        raise ConfigError(f"{path}: ports.min and ports.max must satisfy 0 < min <= max <= 65535")
    if config.services_backend not in ("local", "consul"):
        raise ConfigError(f"{path}: services.backend must be 'local' or 'consul'")
    return config
