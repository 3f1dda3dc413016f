"""The exec driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from herder_exec.bundle import CAPABILITIES

_MODE = {"enum": ["private", "host"]}
_CAPABILITY_LIST = {"type": "array", "items": {"type": "string", "minLength": 1}}

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "minLength": 1},
        "args": {"type": "array", "items": {"type": "string"}},
        "pid_mode": _MODE,
        "ipc_mode": _MODE,
        "cap_add": _CAPABILITY_LIST,
        "cap_drop": _CAPABILITY_LIST,
        "work_dir": {"type": "string", "pattern": "^/", "errorMessage": "must be an absolute path"},
    },
    "required": ["command"],
    "additionalProperties": False,
}

DEFAULT_PIDS_LIMIT = 1024
DEFAULT_CGROUP_PARENT = "/herder"

ALL_CAPABILITIES = (
    "audit_control", "audit_read", "audit_write", "block_suspend", "bpf", "checkpoint_restore", "chown",
    "dac_override", "dac_read_search", "fowner", "fsetid", "ipc_lock", "ipc_owner", "kill", "lease",
    "linux_immutable", "mac_admin", "mac_override", "mknod", "net_admin", "net_bind_service", "net_broadcast",
    "net_raw", "perfmon", "setfcap", "setgid", "setpcap", "setuid", "sys_admin", "sys_boot", "sys_chroot",
    "sys_module", "sys_nice", "sys_pacct", "sys_ptrace", "sys_rawio", "sys_resource", "sys_time",
    "sys_tty_config", "syslog", "wake_alarm",
)
"""Linux's capabilities, as Nomad names them: lower case, without ``CAP_``."""
DEFAULT_CAPABILITIES = tuple(name.removeprefix("CAP_").lower() for name in CAPABILITIES)
"""Nomad's default set for exec: what a task has without ``cap_add``/``cap_drop``, and ``allow_caps``'s default."""

_PLUGIN_KEYS = {"runc", "runc_root", "cgroup_parent", "default_pids_limit", "no_pivot", "allow_caps",
                "allow_pid_mode_host", "allow_ipc_mode_host"}


def capability_names(names: Iterable[Any], where: str) -> frozenset[str]:
    """Capability names as Nomad accepts them (``NET_RAW``, ``cap_net_raw``, ``net_raw``; ``all``), normalised.

    :raises ValueError: a name that is not a Linux capability, naming ``where`` it was given.
    """
    out: set[str] = set()
    for name in names:
        normal = str(name).lower().removeprefix("cap_")
        if normal != "all" and normal not in ALL_CAPABILITIES:
            raise ValueError(f"{where}: {name!r} is not a Linux capability")
        out.add(normal)
    return frozenset(out)


@dataclass(frozen=True)
class PluginConfig:
    """``[plugin.exec]``: which runc, where its state and the tasks' cgroups live, the default limits,
    and what a task may ask for beyond the default isolation."""

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
    allow_caps: frozenset[str] = frozenset(DEFAULT_CAPABILITIES)
    """The capabilities a task may have, of the default set and through ``cap_add``; ``all`` allows every one."""
    allow_pid_mode_host: bool = False
    """Whether a task may share the host's PID namespace (``pid_mode = "host"``)."""
    allow_ipc_mode_host: bool = False
    """Whether a task may share the host's IPC namespace (``ipc_mode = "host"``)."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        """:raises ValueError: an unknown key or a value of the wrong kind (herder reports the plugin as failed)."""
        unknown = sorted(set(raw) - _PLUGIN_KEYS)
        if unknown:
            raise ValueError(f"unknown [plugin.exec] key(s): {', '.join(unknown)}")
        pids = raw.get("default_pids_limit", DEFAULT_PIDS_LIMIT)
        if not isinstance(pids, int) or isinstance(pids, bool) or pids < 0:
            raise ValueError(f"[plugin.exec] default_pids_limit must be a whole number >= 0, not {pids!r}")
        parent = str(raw.get("cgroup_parent", DEFAULT_CGROUP_PARENT))
        if not parent.startswith("/") or ".." in parent.split("/"):
            raise ValueError(f"[plugin.exec] cgroup_parent must be an absolute cgroup path, not {parent!r}")
        allow_caps = raw.get("allow_caps", DEFAULT_CAPABILITIES)
        if not isinstance(allow_caps, list | tuple):
            raise ValueError(f"[plugin.exec] allow_caps must be a list of capability names, not {allow_caps!r}")
        flags = {key: raw.get(key, False) for key in ("no_pivot", "allow_pid_mode_host", "allow_ipc_mode_host")}
        for key, value in flags.items():
            if not isinstance(value, bool):
                raise ValueError(f"[plugin.exec] {key} must be true or false, not {value!r}")
        return cls(runc=str(raw.get("runc") or "runc"), runc_root=str(raw.get("runc_root") or ""),
                   cgroup_parent=parent.rstrip("/") or DEFAULT_CGROUP_PARENT, default_pids_limit=pids,
                   allow_caps=capability_names(allow_caps, "[plugin.exec] allow_caps"), **flags)

    def capabilities(self, add: Iterable[str], drop: Iterable[str]) -> tuple[str, ...]:
        """A task's capabilities, as Nomad's exec computes them: the default set (as far as ``allow_caps``
        allows it) without ``drop``, then with ``add`` (``all`` in either means every capability); what
        ``add`` asks for must be allowed by ``allow_caps``.

        :raises ValueError: a name that is not a capability, or one the plugin does not allow.
        """
        added, dropped = capability_names(add, "cap_add"), capability_names(drop, "cap_drop")
        allowed = set(ALL_CAPABILITIES) if "all" in self.allow_caps else set(self.allow_caps)
        refused = sorted((set(ALL_CAPABILITIES) if "all" in added else added) - allowed)
        if refused:
            raise ValueError(f"cap_add: {', '.join(refused)} not allowed by [plugin.exec] allow_caps")
        enabled = set() if "all" in dropped else (set(DEFAULT_CAPABILITIES) & allowed) - dropped
        enabled |= set(ALL_CAPABILITIES) if "all" in added else added
        return tuple(f"CAP_{name.upper()}" for name in sorted(enabled))


@dataclass(frozen=True)
class TaskConfig:
    """A task's ``config``, after the schema has accepted it."""

    command: str
    args: tuple[str, ...] = ()
    pid_mode: str = "private"
    ipc_mode: str = "private"
    cap_add: tuple[str, ...] = ()
    cap_drop: tuple[str, ...] = ()
    work_dir: str = "/"

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        return cls(command=str(raw["command"]), args=tuple(str(arg) for arg in raw.get("args", ())),
                   pid_mode=raw.get("pid_mode", "private"), ipc_mode=raw.get("ipc_mode", "private"),
                   cap_add=tuple(raw.get("cap_add", ())), cap_drop=tuple(raw.get("cap_drop", ())),
                   work_dir=raw.get("work_dir", "/"))
