"""The java driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NEVER = "(?!)"
"""A pattern no string matches: with ``errorMessage``, how the schema says that a key may not be there."""

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "jar_path": {"type": "string", "minLength": 1},
        "class": {"type": "string", "minLength": 1},
        "class_path": {"type": "string", "minLength": 1},
        "jvm_options": {"type": "array", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "work_dir": {"type": "string", "minLength": 1},
        # Nomad 1.x's keys for its own isolation, accepted and ignored with a warning: herder-exec's
        # container always has its own PID and IPC namespaces and a fixed capability set.
        "pid_mode": {"enum": ["private", "host"]},
        "ipc_mode": {"enum": ["private", "host"]},
        "cap_add": {"type": "array", "items": {"type": "string"}},
        "cap_drop": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
    # Exactly one of jar_path and class, each case with an error naming the key at fault.
    "allOf": [
        {"if": {"not": {"required": ["class"]}},
         "then": {"required": ["jar_path"], "errorMessage": "is required (or class, with class_path)"}},
        {"if": {"required": ["class"]},
         "then": {"properties": {"jar_path": {"pattern": NEVER,
                                              "errorMessage": "cannot be given with class: a task runs a jar "
                                                              "or a main class, not both"}}}},
    ],
}

IGNORED_KEYS = ("cap_add", "cap_drop", "ipc_mode", "pid_mode")
"""Nomad's java keys herder accepts and ignores (with a ``Driver`` event saying so)."""

ISOLATION_MODES = ("auto", "exec", "none")
PLUGIN_KEYS = ("java", "isolation", "exec", "allow_unisolated")


@dataclass(frozen=True)
class PluginConfig:
    """``[plugin.java]``: which java, and whether tasks run in exec's container.

    - ``java``: the java binary, a path or a name looked up on PATH; by
      default ``$JAVA_HOME/bin/java`` when JAVA_HOME is set, else ``java``
      on PATH.
    - ``isolation``: ``auto`` (the default): in exec's container where
      herder-exec is installed and healthy, else as a plain process;
      ``exec``: always in the container (the driver is unhealthy without
      it); ``none``: always a plain process.
    - ``exec``: herder-exec's configuration for the container (the keys of
      ``[plugin.exec]``: ``runc``, ``runc_root``, ``cgroup_parent``,
      ``default_pids_limit``, ``no_pivot``); exec's defaults when absent.
    - ``allow_unisolated``: whether a JVM may run as a plain process at all,
      with no more isolation than raw_exec gives. Herder's front ends make
      the default whether raw_exec is enabled (``herder.app.plugin_tables``),
      so that a plain JVM runs only where a raw_exec task could; true when
      the table comes without it.
    """

    java: str = ""
    isolation: str = "auto"
    exec: Mapping[str, Any] = field(default_factory=dict)
    allow_unisolated: bool = True

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        """:raises ValueError: an unknown key or a value of the wrong kind (herder reports the plugin as failed)."""
        unknown = sorted(set(raw) - set(PLUGIN_KEYS))
        if unknown:
            raise ValueError(f"unknown [plugin.java] key(s): {', '.join(unknown)}")
        isolation = raw.get("isolation", "auto")
        if isolation not in ISOLATION_MODES:
            raise ValueError(f"[plugin.java] isolation must be one of {', '.join(ISOLATION_MODES)}, not {isolation!r}")
        exec_config = raw.get("exec", {})
        if not isinstance(exec_config, Mapping):
            raise ValueError(f"[plugin.java] exec must be a table of herder-exec's keys, not {exec_config!r}")
        java = raw.get("java", "")
        if not isinstance(java, str):
            raise ValueError(f"[plugin.java] java must be a path, not {java!r}")
        allow_unisolated = raw.get("allow_unisolated", True)
        if not isinstance(allow_unisolated, bool):
            raise ValueError(f"[plugin.java] allow_unisolated must be true or false, not {allow_unisolated!r}")
        return cls(java=java, isolation=isolation, exec=dict(exec_config), allow_unisolated=allow_unisolated)

    def java_binary(self, environ: Mapping[str, str] = os.environ) -> Path | None:
        """The java binary, absolute and with its symlinks resolved (``/usr/bin/java`` is one, into the JDK);
        None when there is none."""
        if self.java:
            candidate = shutil.which(self.java)
        elif environ.get("JAVA_HOME"):
            candidate = shutil.which(str(Path(environ["JAVA_HOME"], "bin", "java")))
        else:
            candidate = shutil.which("java", path=environ.get("PATH"))
        return Path(candidate).resolve() if candidate else None

    def describe_java(self, environ: Mapping[str, str] = os.environ) -> str:
        """The java binary as the configuration names it, for messages."""
        if self.java:
            return self.java
        if environ.get("JAVA_HOME"):
            return f"{environ['JAVA_HOME']}/bin/java (JAVA_HOME)"
        return "java on PATH"


def java_home(binary: Path) -> Path:
    """The JDK (or JRE) directory of a resolved java binary: ``<home>/bin/java``, or ``<home>/jre/bin/java``
    in a Java 8 JDK, whose JRE uses the JDK's directory above it."""
    home = binary.parent.parent
    if home.name == "jre" and (home.parent / "bin").is_dir():
        return home.parent
    return home


@dataclass(frozen=True)
class TaskConfig:
    """A task's ``config``, after the schema has accepted it."""

    jar_path: str | None
    main_class: str | None
    class_path: str | None
    jvm_options: tuple[str, ...]
    args: tuple[str, ...]
    work_dir: str | None = None
    ignored: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        return cls(jar_path=raw.get("jar_path"), main_class=raw.get("class"), class_path=raw.get("class_path"),
                   jvm_options=tuple(str(option) for option in raw.get("jvm_options", ())),
                   args=tuple(str(arg) for arg in raw.get("args", ())), work_dir=raw.get("work_dir"),
                   ignored=tuple(key for key in IGNORED_KEYS if key in raw))

    def sets(self, *prefixes: str) -> bool:
        """Whether ``jvm_options`` has an option starting with one of ``prefixes``."""
        return any(option.startswith(prefixes) for option in self.jvm_options)

    def sets_max_heap(self) -> bool:
        """Whether ``jvm_options`` already limit the heap (``-Xmx``, ``-XX:MaxHeapSize=``)."""
        return self.sets("-Xmx", "-XX:MaxHeapSize=")
