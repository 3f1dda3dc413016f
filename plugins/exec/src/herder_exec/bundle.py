"""The OCI bundle of a task: ``config.json`` and the (empty) root filesystem it is built on."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYSTEM_DIRS = ("/bin", "/etc", "/lib", "/lib32", "/lib64", "/sbin", "/usr")
"""The host's directories a task sees, read-only (those that exist)."""

CAPABILITIES = (
    "CAP_AUDIT_WRITE", "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL", "CAP_MKNOD",
    "CAP_NET_BIND_SERVICE", "CAP_SETFCAP", "CAP_SETGID", "CAP_SETPCAP", "CAP_SETUID", "CAP_SYS_CHROOT",
)
"""Nomad's default capability set for exec (Docker's, without NET_RAW): the bounding set of every task."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

MASKED_PATHS = ("/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
                "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware")
READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")
"""As runc's own ``runc spec`` template: what of /proc and /sys a container must not see or change."""


@dataclass(frozen=True)
class User:
    """A user of the host, as the task runs."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]

    @classmethod
    def lookup(cls, name: str) -> User:
        """:raises KeyError: no such user."""
        entry = pwd.getpwnam(name)
        groups = tuple(gid for gid in os.getgrouplist(name, entry.pw_gid) if gid != entry.pw_gid)
        return cls(name, entry.pw_uid, entry.pw_gid, groups)


def _bind(source: str | Path, destination: str, *options: str) -> dict[str, Any]:
    return {"destination": destination, "type": "bind", "source": str(source),
            "options": ["rbind", "nosuid", "nodev", *options]}


def spec(argv: Sequence[str], env: Mapping[str, str], user: User, *, task_dirs: Mapping[str, Path],
         cgroups_path: str, cpu_shares: int, pids_limit: int, read_only: Sequence[Path] = (),
         cwd: str = "/", capabilities: Sequence[str] = CAPABILITIES,
         host_namespaces: Collection[str] = (), netns: Path | None = None, hostname: str = "",
         files: Mapping[str, Path] = {}, volumes: Sequence[Mapping[str, Any]] = (),
         cpus: Sequence[int] = ()) -> dict[str, Any]:
    """The OCI runtime spec of a task.

    ``task_dirs`` maps the task's directories on the host to where the task
    sees them (``/local`` ...). ``read_only`` are more directories of the
    host the task sees where they are, read-only (a JDK outside ``/usr``);
    one already inside a system directory is visible without a bind of its
    own. ``capabilities`` is the bounding set (effective for root only);
    ``host_namespaces`` (``pid``, ``ipc``) are shared with the host instead
    of new.

    The task joins the network namespace at ``netns`` (its allocation's)
    when given, else shares the host's network: ports are bound on the
    host, as with Nomad's exec. ``hostname`` is the container's (its UTS
    namespace's; "": the host's). ``files`` are files of the host bound
    read-only at the paths in the task that name them (``/etc/resolv.conf``),
    over the host's system directories. ``volumes``: more mounts
    (host volumes), bound last, over the rest. ``cpus``: the host CPUs the task
    is pinned to (its cpuset), none for any.
    """
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
    ]
    mounts += [_bind(path, path, "ro") for path in system_binds()]
    mounts += [_bind(source, destination, "rw") for destination, source in task_dirs.items()]
    # After the task's directories: a runtime under /tmp of the host stays visible over the task's /tmp.
    mounts += [_bind(path, str(path), "ro") for path in _extra_binds(read_only)]
    mounts += [_bind(source, destination, "ro") for destination, source in files.items()]
    mounts += [dict(volume) for volume in volumes]
    privileged = user.uid == 0  # a task of another user starts with no capability, as any process of that user
    environment = {"PATH": DEFAULT_PATH, **env}
    resources: dict[str, Any] = {"devices": [{"allow": False, "access": "rwm"}], "cpu": {"shares": max(2, cpu_shares)}}
    if cpus:
        resources["cpu"]["cpus"] = ",".join(str(cpu) for cpu in sorted(cpus))
    if pids_limit > 0:
        resources["pids"] = {"limit": pids_limit}
    namespaces: list[dict[str, str]] = [{"type": kind} for kind in ("pid", "ipc", "uts", "mount")
                                        if kind not in host_namespaces]
    if netns is not None:
        namespaces.append({"type": "network", "path": str(netns)})
    config: dict[str, Any] = {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": user.uid, "gid": user.gid, "additionalGids": list(user.groups)},
            "args": list(argv),
            "env": [f"{name}={value}" for name, value in environment.items()],
            "cwd": cwd,
            "capabilities": {"bounding": list(capabilities),
                             **{kind: list(capabilities) if privileged else [] for kind in ("effective", "permitted")}},
            "noNewPrivileges": True,
        },
        "root": {"path": "rootfs", "readonly": True},
        "mounts": mounts,
        "linux": {
            "namespaces": namespaces,
            "cgroupsPath": cgroups_path,
            "resources": resources,
            "maskedPaths": list(MASKED_PATHS),
            "readonlyPaths": list(READONLY_PATHS),
        },
    }
    if hostname:
        config["hostname"] = hostname
    return config


def system_binds() -> list[str]:
    """The host's system directories :func:`spec` binds: those that exist and are not links (a link, say
    ``/lib -> usr/lib``, is made again in the root filesystem, where it leads into a bound directory)."""
    return [path for path in SYSTEM_DIRS if os.path.isdir(path) and not os.path.islink(path)]


def binding(path: Path, read_only: Sequence[Path] = ()) -> str | None:
    """The directory of the host that :func:`spec` binds into every container (given its ``read_only``)
    and that ``path`` lies in, comparing resolved paths; None when ``path`` is in none of them."""
    resolved = os.path.realpath(path)
    for bound in [*system_binds(), *map(str, _extra_binds(read_only))]:
        if Path(resolved).is_relative_to(os.path.realpath(bound)):
            return bound
    return None


def _extra_binds(read_only: Sequence[Path]) -> list[Path]:
    """The ``read_only`` directories that need a bind of their own."""
    return [path for path in read_only if not _in_system_dir(path)]


def _in_system_dir(path: Path) -> bool:
    return any(path.is_relative_to(system) for system in SYSTEM_DIRS)


def write(bundle: Path, config: Mapping[str, Any], files: Mapping[str, str] = {}) -> None:
    """Write ``config.json`` and the root filesystem: empty directories for runc to mount onto, and, for the
    host's system directories that are symlinks (``/bin -> usr/bin`` on a merged-/usr host), the same symlinks.
    ``files`` are more files of the bundle (name -> text), readable by all: those :func:`spec` binds into
    the task read-only.

    ``config.json`` holds the task's environment, its secrets with it: the bundle is root's alone (0700,
    the file 0600), whatever the umask, and the file is written through the directory's descriptor,
    never through a link.
    """
    bundle.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory = os.open(bundle, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchmod(directory, 0o700)  # mkdir's mode is filtered by the umask; an earlier run's bundle keeps its own
        rootfs = bundle / "rootfs"
        rootfs.mkdir(exist_ok=True)
        for path in SYSTEM_DIRS:
            if os.path.islink(path):
                link = rootfs / path.lstrip("/")
                if not link.is_symlink():
                    link.symlink_to(os.readlink(path))
        _write_file(directory, "config.json", json.dumps(config, indent=1), 0o600)
        for name, text in files.items():
            _write_file(directory, name, text, 0o644)
    finally:
        os.close(directory)


def _write_file(directory: int, name: str, text: str, mode: int) -> None:
    """Write file ``name`` of the directory open as ``directory``, never through a link, with ``mode``."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        os.fchmod(file.fileno(), mode)  # a file an earlier run left
        file.write(text)
