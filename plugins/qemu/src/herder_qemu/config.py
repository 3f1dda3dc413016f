"""The qemu driver's configuration: the plugin's own table and each task's ``config``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_EMULATOR = "qemu-system-x86_64"
ACCELERATORS = ("tcg", "kvm")
DRIVE_INTERFACES = ("ide", "scsi", "sd", "mtd", "floppy", "pflash", "virtio", "none")

SEPARATORS = {"image_path": ",", "kernel": ",", "initrd": ", \t\n"}
"""What QEMU reads as the end of a path in each value it is given: ``,`` ends an option's value (and,
in ``-initrd`` for a multiboot kernel, one module's file: ``local/x,/etc/shadow`` is two modules); a
blank ends a multiboot module's file name, its arguments follow. A path holding one is refused, so
that no part of it becomes a path herder did not check."""


def _path_schema(key: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "pattern": f"^[^{SEPARATORS[key]}]*$",
            "errorMessage": f"must not hold {_shown(SEPARATORS[key])}: QEMU splits a path there"}


def _shown(characters: str) -> str:
    names = {",": "a comma", " ": "a space", "\t": "a tab", "\n": "a newline"}
    return " or ".join(names[character] for character in characters)


TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "image_path": _path_schema("image_path"),
        "drive_interface": {"enum": list(DRIVE_INTERFACES)},
        "kernel": _path_schema("kernel"),
        "initrd": _path_schema("initrd"),
        "append": {"type": "string"},
        "accelerator": {"enum": list(ACCELERATORS)},
        "port_map": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1, "maximum": 65535}},
        "args": {"type": "array", "items": {"type": "string"}},
        "graceful_shutdown": {"type": "boolean"},
    },
    # A disk image, or a kernel to boot directly: one of the two is required.
    "if": {"required": ["kernel"]},
    "else": {"required": ["image_path"], "errorMessage": "is required (or kernel, for a direct kernel boot)"},
    "dependentRequired": {"initrd": ["kernel"], "append": ["kernel"]},
    "additionalProperties": False,
}


@dataclass(frozen=True)
class PluginConfig:
    """``[plugin.qemu]``: which QEMU, and where images outside the task directory may be."""

    emulator: str = DEFAULT_EMULATOR
    """The QEMU system emulator: a path, or a name looked up on PATH."""
    image_paths: tuple[Path, ...] = ()
    """Directories whose images (and kernels, initrds) tasks may name by absolute path, as Nomad's
    ``image_paths``. A task's own directory is always allowed."""
    args_allowlist: tuple[str, ...] = ()
    """The options (``-device``, ...) a task's ``args`` may give QEMU, as Nomad's ``args_allowlist``.
    Unlike Nomad's, none by default: any option could reach the host's devices
    (``-drive file=/dev/sda``), so a task may give ``args`` only where the operator allowed options."""

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> PluginConfig:
        """:raises ValueError: an unknown key or a value of the wrong kind (herder reports the plugin as failed)."""
        unknown = sorted(set(raw) - {"emulator", "image_paths", "args_allowlist"})
        if unknown:
            raise ValueError(f"unknown [plugin.qemu] key(s): {', '.join(unknown)}")
        paths = raw.get("image_paths", [])
        if not isinstance(paths, list) or not all(isinstance(path, str) and path.startswith("/") for path in paths):
            raise ValueError(f"[plugin.qemu] image_paths must be a list of absolute paths, not {paths!r}")
        emulator = raw.get("emulator", DEFAULT_EMULATOR)
        if not isinstance(emulator, str) or not emulator:
            raise ValueError(f"[plugin.qemu] emulator must be a program's name or path, not {emulator!r}")
        allowlist = raw.get("args_allowlist", [])
        if not isinstance(allowlist, list) or not all(isinstance(arg, str) and arg.startswith("-")
                                                      for arg in allowlist):
            raise ValueError(f"[plugin.qemu] args_allowlist must be a list of QEMU options (-smp ...), "
                             f"not {allowlist!r}")
        return cls(emulator=emulator, image_paths=tuple(Path(path) for path in paths),
                   args_allowlist=tuple(option_name(arg) for arg in allowlist))

    def refused_args(self, args: tuple[str, ...]) -> list[str]:
        """The words of ``args`` that ``args_allowlist`` does not allow; every argument when it is empty.

        An option must be allowed, and a word that is not an option must be the value of the option
        before it: QEMU takes a word standing alone as a disk image (``-hda``), which it opens and
        probes itself (a qcow2 naming ``/etc/passwd`` as its backing file), past herder's checks.
        """
        if not self.args_allowlist:
            return list(args)
        refused = []
        for index, arg in enumerate(args):
            if arg.strip().startswith("-"):
                if option_name(arg) not in self.args_allowlist:
                    refused.append(arg)
            elif index == 0 or not args[index - 1].strip().startswith("-"):
                refused.append(arg)
        return refused


def option_name(arg: str) -> str:
    """A QEMU option as the allowlist names it: QEMU takes ``--smp`` for ``-smp``, and ``-smp=2`` nowhere,
    but a word is never let through for its spelling."""
    name = arg.strip().split("=", 1)[0]
    return "-" + name.lstrip("-")


@dataclass(frozen=True)
class TaskConfig:
    """A task's ``config``, after the schema has accepted it."""

    image_path: str = ""
    drive_interface: str = "ide"
    kernel: str = ""
    initrd: str = ""
    append: str = ""
    accelerator: str = "tcg"
    port_map: Mapping[str, int] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    graceful_shutdown: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TaskConfig:
        """:raises ValueError: what the schema cannot say (both a disk image and a kernel), or a path holding
            a separator once interpolated (the schema saw the job's text)."""
        if raw.get("image_path") and raw.get("kernel"):
            raise ValueError("config.image_path and config.kernel: give a disk image or a kernel, not both")
        for key, separators in SEPARATORS.items():
            value = str(raw.get(key, ""))
            if any(character in value for character in separators):
                raise ValueError(f"config.{key}: {value!r} must not hold {_shown(separators)}: QEMU splits a "
                                 f"path there")
        return cls(
            image_path=str(raw.get("image_path", "")), drive_interface=str(raw.get("drive_interface", "ide")),
            kernel=str(raw.get("kernel", "")), initrd=str(raw.get("initrd", "")), append=str(raw.get("append", "")),
            accelerator=str(raw.get("accelerator", "tcg")),
            port_map={str(label): int(port) for label, port in (raw.get("port_map") or {}).items()},
            args=tuple(str(arg) for arg in raw.get("args", ())),
            graceful_shutdown=bool(raw.get("graceful_shutdown", False)))
