"""Plugins and drivers: loading them as the configuration says, and describing them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from herder.client.config import Config
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins


def load_hooks(config: Config) -> Hooks:
    """Every installed plugin, as the configuration enables them."""
    return Hooks(load_plugins(plugin_tables(config), config.disabled_plugins))


def plugin_tables(config: Config) -> dict[str, dict[str, Any]]:
    """The ``[plugin.NAME]`` tables the plugins are created with.

    A plain, unisolated JVM is no more isolated than a raw_exec task: the java
    driver allows them (``allow_unisolated``) exactly where raw_exec is enabled
    (``herder run``'s default; the agent's only with ``[plugin.raw_exec]
    enabled = true``), unless its own table says otherwise. A plugin knows
    nothing of another's table, so this is said here.
    """
    tables = {name: dict(table) for name, table in config.plugin.items()}
    raw_exec = "raw_exec" not in config.disabled_plugins and bool(tables.get("raw_exec", {}).get("enabled", True))
    tables.setdefault("java", {}).setdefault("allow_unisolated", raw_exec)
    return tables


def agent_config(config: Config) -> Config:
    """The configuration as the agent uses it: raw_exec is off unless the
    configuration turns it on (``[plugin.raw_exec] enabled = true``), and with
    it the java driver's plain JVMs (:func:`plugin_tables`)."""
    plugin = {name: dict(table) for name, table in config.plugin.items()}
    plugin.setdefault("raw_exec", {}).setdefault("enabled", False)
    return replace(config, plugin=plugin)


def failed_plugins(hooks: Hooks) -> list[str]:
    """One warning per plugin that could not be loaded."""
    return [f"plugin {r.name} ({r.distribution} {r.version}) was not loaded: {r.error}"
            for r in hooks.plugins.records if r.error]


def driver_rows(hooks: Hooks) -> list[dict[str, Any]]:
    """Every driver with its distribution and fingerprint: ``herder drivers``, ``GET /v1/drivers``."""
    rows: list[dict[str, Any]] = []
    for name in hooks.drivers:
        fingerprint = hooks.fingerprint(name)
        record = hooks.plugins.record(name)
        rows.append({"name": name, "distribution": record.distribution if record else "",
                     "version": record.version if record else "", "detected": fingerprint.detected,
                     "healthy": fingerprint.healthy, "description": fingerprint.description,
                     "attributes": dict(sorted(fingerprint.attributes.items()))})
    return rows


def plugin_rows(hooks: Hooks) -> list[dict[str, Any]]:
    """Every plugin, loaded or failed: ``herder plugins``, ``GET /v1/plugins``."""
    return [r.to_json() for r in sorted(hooks.plugins.records, key=lambda r: (r.kind, r.name))]
