"""The exec driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["command"],
    "additionalProperties": False,
}

DEFAULT_PIDS_LIMIT = 1024
DEFAULT_CGROUP_PARENT = "/herder"


@dataclass(frozen=True)
class PluginConfig:
    """``[plugin.exec]``: which runc, where its state and the tasks' cgroups live, the default limits."""

    runc: str = "runc"
    """The runc binary: a path, or a name looked up on PATH."""
    runc_root: str = ""
    """runc's ``--root`` (its state directory); empty: runc's default (``/run/runc``)."""
    cgroup_parent: str = DEFAULT_CGROUP_PARENT
    """The cgroup under which every task gets ``<container id>`` (with the memory limit) and runc's ``task``."""
    default_pids_limit: int = DEFAULT_PIDS_LIMIT
    """How many processes (threads included) a task may have at once; 0 for no limit."""
    no_pivot: bool = False
    """``runc run --no-pivot``: for hosts whose root filesystem cannot be pivoted away from (a ramdisk)."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        """:raises ValueError: an unknown key or a value of the wrong kind (herder reports the plugin as failed)."""
        unknown = sorted(set(raw) - {"runc", "runc_root", "cgroup_parent", "default_pids_limit", "no_pivot"})
        if unknown:
            raise ValueError(f"unknown [plugin.exec] key(s): {', '.join(unknown)}")
        pids = raw.get("default_pids_limit", DEFAULT_PIDS_LIMIT)
        if not isinstance(pids, int) or isinstance(pids, bool) or pids < 0:
            raise ValueError(f"[plugin.exec] default_pids_limit must be a whole number >= 0, not {pids!r}")
        parent = str(raw.get("cgroup_parent", DEFAULT_CGROUP_PARENT))
        if not parent.startswith("/") or ".." in parent.split("/"):
            raise ValueError(f"[plugin.exec] cgroup_parent must be an absolute cgroup path, not {parent!r}")
        return cls(runc=str(raw.get("runc") or "runc"), runc_root=str(raw.get("runc_root") or ""),
                   cgroup_parent=parent.rstrip("/") or DEFAULT_CGROUP_PARENT, default_pids_limit=pids,
                   no_pivot=bool(raw.get("no_pivot", False)))


@dataclass(frozen=True)
class TaskConfig:
    """A task's ``config``, after the schema has accepted it."""

    command: str
    args: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        return cls(command=str(raw["command"]), args=tuple(str(arg) for arg in raw.get("args", ())))
