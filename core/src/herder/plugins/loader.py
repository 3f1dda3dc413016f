"""Finding and loading plugins through entry points.

Every entry point is loaded on its own: an import error, a factory that raises,
a hookimpl that does not match the spec, or two plugins claiming one name is
recorded in a :class:`PluginRecord` and that plugin is left out; the others
still load.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, PackageNotFoundError, entry_points, version
from types import CodeType, TracebackType
from typing import Any, Literal

import pluggy

from herder import hookspecs

DRIVER_GROUP = "herder.drivers"
PLUGIN_GROUP = "herder.plugins"

Kind = Literal["driver", "lifecycle", "builtin"]
_GROUP_KIND: dict[str, Kind] = {DRIVER_GROUP: "driver", PLUGIN_GROUP: "lifecycle"}
_REQUIRED_DRIVER_HOOKS = ("herder_task_start",)
DRIVER_HOOKS = frozenset({
    "herder_driver_fingerprint", "herder_driver_task_schema", "herder_task_start", "herder_task_exec",
    "herder_task_exec_session", "herder_task_recover", "herder_driver_capabilities",
    "herder_alloc_network_create", "herder_alloc_network_destroy",
})
"""Driver-scoped hooks: only the task's driver takes part, so a lifecycle plugin may not implement them."""


@dataclass
class PluginRecord:
    """What ``herder plugins`` shows of one plugin, loaded or not."""

    name: str
    kind: Kind
    distribution: str = ""
    version: str = ""
    entry_point: str = ""
    hooks: list[str] = field(default_factory=list)
    error: str = ""
    disabled: bool = False

    @property
    def status(self) -> str:
        if self.disabled:
            return "disabled"
        return "failed" if self.error else "loaded"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "distribution": self.distribution,
            "version": self.version,
            "entry_point": self.entry_point,
            "hooks": self.hooks,
            "error": self.error or None,
        }


class PluginSet:
    """The loaded plugins: a pluggy manager plus what is known about each plugin."""

    def __init__(self) -> None:
        self.pm = pluggy.PluginManager("herder")
        self.pm.add_hookspecs(hookspecs)
        self.records: list[PluginRecord] = []
        self._by_kind: dict[Kind, dict[str, object]] = {"driver": {}, "lifecycle": {}, "builtin": {}}
        self._code_owner: dict[CodeType, str] = {}
        if os.environ.get("HERDER_DEBUG_PLUGINS") == "1":
            self.pm.trace.root.setwriter(lambda text: sys.stderr.write(f"[herder plugins] {text}"))
            self.pm.enable_tracing()

    # -- queries -----------------------------------------------------------

    def plugins(self, kind: Kind) -> dict[str, object]:
        """Loaded plugins of one kind, by name."""
        return dict(self._by_kind[kind])

    @property
    def driver_names(self) -> list[str]:
        return sorted(self._by_kind["driver"])

    def record(self, name: str) -> PluginRecord | None:
        return next((r for r in self.records if r.name == name and not r.error), None)

    def blame(self, exc: BaseException) -> str:
        """The name of the plugin whose hook raised ``exc`` ("" if none did)."""
        tb: TracebackType | None = exc.__traceback__
        owner = ""
        while tb is not None:
            owner = self._code_owner.get(tb.tb_frame.f_code, owner)
            tb = tb.tb_next
        return owner

    # -- registration ------------------------------------------------------

    def add(self, record: PluginRecord, plugin: object) -> None:
        """Register ``plugin``; on failure, record the error and leave it out."""
        self.records.append(record)
        if self.pm.get_plugin(record.name) is not None:
            record.error = f"the name {record.name!r} is already taken by another plugin"
            return
        try:
            self.pm.register(plugin, name=record.name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            record.error = f"invalid hook implementation: {exc}"
            return
        callers = self.pm.get_hookcallers(plugin) or []
        names = {caller.name for caller in callers}
        unknown = sorted(caller.name for caller in callers if caller.spec is None)
        missing = [h for h in _REQUIRED_DRIVER_HOOKS if record.kind == "driver" and h not in names]
        driver_only = sorted(names & DRIVER_HOOKS) if record.kind != "driver" else []
        if unknown or missing or driver_only:
            self.pm.unregister(plugin)
            if unknown:
                record.error = f"unknown hook(s): {', '.join(unknown)}"
            elif missing:
                record.error = f"a driver must implement {', '.join(missing)}"
            else:
                record.error = f"only a driver may implement {', '.join(driver_only)} (driver-scoped hooks)"
            return
        record.hooks = sorted(names)
        for caller in callers:
            for impl in caller.get_hookimpls():
                if impl.plugin is plugin:
                    self._code_owner[impl.function.__code__] = record.name
        self._by_kind[record.kind][record.name] = plugin

    def add_builtin(self, name: str, plugin: object) -> None:
        """Register one of herder's own lifecycle plugins."""
        self.add(PluginRecord(name=name, kind="builtin", distribution="herder", version=_core_version()), plugin)

    def remove(self, name: str) -> None:
        """Unregister a plugin and forget it (a built-in plugin whose client closed)."""
        self.records = [r for r in self.records if r.name != name]
        for plugins in self._by_kind.values():
            plugin = plugins.pop(name, None)
            if plugin is not None:
                self.pm.unregister(plugin)

    def fail(self, name: str, error: str) -> None:
        """Leave out a loaded plugin that turned out broken, recording why."""
        record = self.record(name)
        if record is None:
            return
        record.error = error
        plugin = self._by_kind[record.kind].pop(name, None)
        if plugin is not None:
            self.pm.unregister(plugin)

    def unavailable(self) -> dict[str, str]:
        """Why each known driver that cannot be used is unavailable: disabled, or failed."""
        return {r.name: "disabled" if r.disabled else f"broken: {r.error}"
                for r in self.records if r.kind == "driver" and (r.disabled or r.error)
                and r.name not in self._by_kind["driver"]}

    def fail_duplicates(self) -> None:
        """Two distributions offering one driver name: neither is used, both are named."""
        seen: dict[tuple[Kind, str], list[PluginRecord]] = {}
        for record in self.records:
            seen.setdefault((record.kind, record.name), []).append(record)
        for (kind, name), group in seen.items():
            if len(group) < 2 or kind == "builtin":
                continue
            who = " and ".join(f"{r.distribution or '?'} {r.version}".strip() for r in group)
            for record in group:
                record.error = f"{kind} {name!r} is offered by more than one distribution: {who}"
            plugin = self._by_kind[kind].pop(name, None)
            if plugin is not None:
                self.pm.unregister(plugin)


def _has_hookimpls(obj: object) -> bool:
    return any(
        name.startswith("herder_") and hasattr(getattr(obj, name, None), "herder_impl") for name in dir(obj)
    )


def instantiate(obj: object, config: Mapping[str, Any]) -> object:
    """The plugin an entry point names: a module or instance as is, a class or factory called with its config."""
    if inspect.ismodule(obj) or not callable(obj):
        return obj
    if inspect.isclass(obj) or not _has_hookimpls(obj):
        return obj(dict(config))
    return obj


def _core_version() -> str:
    try:
        return version("herder")
    except PackageNotFoundError:
        return ""


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _record_for(ep: EntryPoint, kind: Kind) -> PluginRecord:
    dist = ep.dist
    return PluginRecord(
        name=ep.name,
        kind=kind,
        distribution=dist.name if dist is not None else "",
        version=dist.version if dist is not None else "",
        entry_point=ep.value,
    )


def discover() -> list[tuple[Kind, EntryPoint]]:
    """Every herder entry point installed, once per (distribution, name)."""
    found: list[tuple[Kind, EntryPoint]] = []
    seen: set[tuple[str, str, str]] = set()
    for group, kind in _GROUP_KIND.items():
        for ep in entry_points(group=group):
            key = (group, ep.name, ep.dist.name if ep.dist else ep.value)
            if key not in seen:
                seen.add(key)
                found.append((kind, ep))
    return found


def load_plugins(
    plugin_config: Mapping[str, Mapping[str, Any]] | None = None,
    disabled: Iterable[str] = (),
) -> PluginSet:
    """Load every installed driver and lifecycle plugin.

    herder's own built-in lifecycle plugins are added by the client that owns
    them (:meth:`PluginSet.add_builtin`), since they work for that client.

    :param plugin_config: ``[plugin.NAME]`` tables by plugin name.
    :param disabled: names of plugins not to load.
    """
    plugin_config = plugin_config or {}
    disabled = set(disabled)
    plugins = PluginSet()
    for kind, ep in discover():
        record = _record_for(ep, kind)
        if ep.name in disabled:
            record.disabled = True
            plugins.records.append(record)
            continue
        try:
            plugin = instantiate(ep.load(), plugin_config.get(ep.name, {}))
        except Exception as exc:  # any failure of third-party code is reported, not raised
            record.error = _describe(exc)
            plugins.records.append(record)
            continue
        plugins.add(record, plugin)
    plugins.fail_duplicates()
    return plugins
