"""The qemu driver: a virtual machine as a task, QEMU's process supervised like any task process.

QEMU runs in the foreground through :class:`herder.sdk.SupervisedProcess`,
in the task directory, as the task's user (default ``nobody``, never root):
the guest's first serial port is QEMU's stdout, so the console is the task's
log; the task's ports are forwarded into the guest by QEMU's user-mode
network (``hostfwd``, tcp and udp); in a group with a network of its own,
QEMU runs in the allocation's namespace, its forwards listen there on each
port's ``to`` (the CNI plugins map the host port to it) and the guest's
connections leave from there; QEMU's machine protocol (QMP) listens on
``secrets/qmp.sock``, for the graceful power-off. The guest outlives herder
with QEMU, and is reattached through the supervisor.

QEMU as the task's user cannot pass through herder's data dir (0700): it
reaches its files by paths relative to the task directory, its working
directory (the supervisor enters it before giving up root), and the task's
own directories are given to its user at each start, as exec does.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from herder import (
    AllocatedPort,
    DriverCapabilities,
    DriverError,
    Fingerprint,
    RecoverableError,
    Task,
    TaskContext,
    TaskHandle,
    hookimpl,
)
from herder.sdk import SupervisedProcess, TaskUser, give_tree, resolve_in_task_dir, set_port_vars, set_task_dirs
from herder_qemu import images, kvm
from herder_qemu.config import TASK_SCHEMA, PluginConfig, TaskConfig
from herder_qemu.handle import QemuHandle
from herder_qemu.qmp import SOCKET, Qmp, QmpError

VERSION_TIMEOUT = 2.0
STARTUP_TIMEOUT = 10.0
"""How long QEMU has to set the machine up (its monitor answers) or fail."""
STARTUP_POLL = 0.05
MONITOR = "monitor"
"""``ctx.created`` kind: the QMP socket, removed by cleanup."""
DEFAULT_USER = "nobody"
"""Whom QEMU runs as when the task names no ``user`` (as exec's tasks)."""
OWN_DIRS = ("local_dir", "secrets_dir", "tmp_dir")
"""The task's own directories, given to QEMU's user at each start (the shared alloc dir is every task's)."""
NIC = "virtio-net-pci"
FORWARDING_FAILED = "Could not set up host forwarding rule"

_VERSION = re.compile(r"version\s+(\d+(?:\.\d+)+)")


def qemu_version(emulator: str, timeout: float = VERSION_TIMEOUT) -> str:
    """The version ``emulator --version`` reports (``7.2.22``).

    :raises OSError, subprocess.SubprocessError, ValueError: it does not run, or says no version.
    """
    done = subprocess.run([emulator, "--version"], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=True)
    found = _VERSION.search(done.stdout)
    if found is None:
        raise ValueError(f"no version in {done.stdout.strip()[:200]!r}")
    return found[1]


def _option(value: str | Path) -> str:
    """A value inside a QEMU ``-opt key=value,...`` list: commas doubled."""
    return str(value).replace(",", ",,")


class QemuDriver:
    """The ``qemu`` driver; herder creates it with the ``[plugin.qemu]`` table."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = PluginConfig.from_mapping(config)
        self._kvm_lock = threading.Lock()
        self._kvm: tuple[bool, str] | None = None

    def _emulator(self) -> str | None:
        found = shutil.which(self.config.emulator)
        return str(Path(found).absolute()) if found else None

    def emulator(self) -> str:
        """:raises DriverError: QEMU is not there."""
        found = self._emulator()
        if found is None:
            raise DriverError(f"QEMU not found: {self.config.emulator}")
        return found

    def kvm(self) -> tuple[bool, str]:
        """Whether KVM runs guests here, and why (the probe's first answer is kept)."""
        with self._kvm_lock:
            if self._kvm is None:
                self._kvm = kvm.probe()
            return self._kvm

    # -- driver description -------------------------------------------------------------------

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        emulator = self._emulator()
        if emulator is None:
            return Fingerprint(detected=False, healthy=False, description=f"QEMU not found: {self.config.emulator}")
        try:
            version = qemu_version(emulator)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            return Fingerprint(detected=False, healthy=False, description=f"{emulator} does not work: {exc}")
        works, why = self.kvm()
        return Fingerprint(detected=True, healthy=True,
                           description=f"healthy; accelerator kvm {'available' if works else 'unavailable'}: {why}",
                           attributes={"driver.qemu.version": version, "driver.qemu.kvm": str(works).lower()})

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return TASK_SCHEMA

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        """QEMU runs in its allocation's network namespace, its user-mode network's sockets with it."""
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}))

    # -- task start ---------------------------------------------------------------------------

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        """Check the config against this host, and give the task its ports as the guest sees them."""
        config = self._task_config(task, ctx)
        labels = {port.label for port in ctx.ports}
        unknown = sorted(set(config.port_map) - labels)
        if unknown:
            raise DriverError(f"{_path(ctx, 'port_map')}: {', '.join(unknown)} not a port of the task "
                              f"(ports: {', '.join(sorted(labels)) or 'none'})")
        refused = self.config.refused_args(config.args)
        if refused and not self.config.args_allowlist:
            raise DriverError(f"{_path(ctx, 'args')}: no QEMU option is allowed in args (they could hand the "
                              f"guest the host's devices): set [plugin.qemu] args_allowlist to the options tasks "
                              f"may use")
        if refused:
            raise DriverError(f"{_path(ctx, 'args')}: {', '.join(refused)} not allowed by [plugin.qemu] "
                              f"args_allowlist ({', '.join(self.config.args_allowlist)}): each word must be an "
                              f"allowed option or the value after one (QEMU reads a word alone as a disk image)")
        self._images(config, ctx)
        if config.accelerator == "kvm":
            works, why = self.kvm()
            if not works:
                raise DriverError(f"{_path(ctx, 'accelerator')}: kvm does not work on this host: {why}")
            self._kvm_groups(ctx, task_user(task))
        for port in ctx.ports:
            set_port_vars(ctx.env, port.label, _guest_port(config, port.label, port.to, port.value))
        # As QEMU reaches them from the task directory: args = ["-serial", "file:${NOMAD_TASK_DIR}/serial.log"].
        set_task_dirs(ctx.env, *(_relative(ctx, directory) for directory in (
            ctx.task_dir.alloc_dir, ctx.task_dir.local_dir, ctx.task_dir.secrets_dir)))

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        config = self._task_config(task, ctx)
        user = task_user(task)
        if user is not None:
            for field in OWN_DIRS:
                give_tree(getattr(ctx.task_dir, field), (user.uid, user.gid))
        monitor = ctx.task_dir.secrets_dir / SOCKET
        monitor.unlink(missing_ok=True)  # left by a QEMU that was killed
        ctx.created.add(MONITOR, str(monitor))
        argv = self.argv(task, ctx, config, user)
        groups = self._kvm_groups(ctx, user) if config.accelerator == "kvm" else ()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **ctx.env,
               "TMPDIR": _relative(ctx, ctx.task_dir.tmp_dir)}  # a shared image's throwaway overlay goes there
        proc = SupervisedProcess.spawn(task, ctx, argv, env=env, cwd=ctx.task_dir.dir,
                                       user=user.name if user else None, groups=groups,
                                       netns=ctx.network.path if ctx.network is not None else None)
        handle = QemuHandle(proc, monitor, config.graceful_shutdown)
        self._await_machine(handle, ctx)
        return handle

    def argv(self, task: Task, ctx: TaskContext, config: TaskConfig, user: TaskUser | None) -> list[str]:
        """QEMU's command line for the task (run in the task directory, as ``user``).

        :raises DriverError: a boot file is not there, or a qcow2 image names another file.
        """
        machine = f"type=pc,accel={config.accelerator}"
        argv = [self.emulator(), "-name", _option(f"{ctx.alloc_name}.{ctx.task_name}"), "-machine", machine,
                *(("-cpu", "host") if config.accelerator == "kvm" else ()),
                "-m", f"{task.resources.memory}M",
                "-display", "none", "-serial", "stdio", "-monitor", "none",
                "-qmp", f"unix:{_relative(ctx, ctx.task_dir.secrets_dir / SOCKET)},server=on,wait=off"]
        boot = self._images(config, ctx)
        if config.image_path:
            path, shared = boot["image_path"]
            image = _seen(ctx, path, shared)
            kind = self._format(ctx, image, path, user)
            # The file protocol named, so that no part of the name is read as another (nbd:, json:); an image
            # outside the task directory may be shared: the guest writes to a throwaway overlay.
            drive = f"file.driver=file,file.filename={_option(image)},format={kind},if={config.drive_interface}"
            argv += ["-drive", drive + (",snapshot=on" if shared else "")]
        else:
            argv += ["-kernel", _seen(ctx, *boot["kernel"])]
            if config.initrd:
                argv += ["-initrd", _seen(ctx, *boot["initrd"])]
            if config.append:
                argv += ["-append", config.append]
        forwards = "".join(
            f",hostfwd={protocol}:{_forwarded_from(ctx, port)}-:{_guest_port(config, port.label, port.to, port.value)}"
            for port in ctx.ports for protocol in ("tcp", "udp"))
        argv += ["-netdev", f"user,id=user.0{forwards}", "-device", f"{NIC},netdev=user.0"]
        return [*argv, *config.args]

    def _format(self, ctx: TaskContext, image: str, path: Path, user: TaskUser | None) -> str:
        """The image's format, pinned for QEMU: qcow2 (its header checked to name no other file) or raw.

        :raises DriverError: it is not a regular file, names another file, or cannot be inspected.
        """
        try:
            kind = images.image_format(path)
            if kind == "qcow2":
                qemu_img = images.find_qemu_img(self.emulator())
                if qemu_img is None:
                    raise ValueError("qemu-img not found (Debian: qemu-utils): herder reads a qcow2 image's header "
                                     "before QEMU opens it")
                images.check_qcow2(qemu_img, image, cwd=ctx.task_dir.dir, user=user)
        except ValueError as exc:
            raise DriverError(f"{_path(ctx, 'image_path')}: {exc}") from None
        return kind

    def _kvm_groups(self, ctx: TaskContext, user: TaskUser | None) -> tuple[int, ...]:
        """The group that opens ``/dev/kvm`` to QEMU's user, if it needs one.

        :raises DriverError: only root could open it.
        """
        if user is None:
            return ()
        try:
            return kvm.device_groups(user.uid, user.groups)
        except (OSError, ValueError) as exc:
            raise DriverError(f"{_path(ctx, 'accelerator')}: {exc}") from None

    def _await_machine(self, handle: QemuHandle, ctx: TaskContext) -> None:
        """Wait until QEMU's monitor answers (the machine is set up) or QEMU exits.

        A guest may also be done before the monitor was reached: QEMU then
        exited without an error of its own, and the handle has its result.

        :raises RecoverableError: a host port could not be forwarded (it is taken: a later try may find it free).
        :raises DriverError: QEMU could not set the machine up (its message says why).
        """
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            result = handle.wait(STARTUP_POLL)
            if result is not None:
                errors = [line for line in _stderr_tail(ctx) if "qemu" in line and "warning:" not in line]
                said = " ".join(errors)
                if FORWARDING_FAILED in said:
                    raise RecoverableError(f"QEMU could not forward a host port into the guest (is it in use?): "
                                           f"{said}")
                if result.exit_code == 1 and errors:  # QEMU's own failure (a guest's would not say "qemu")
                    raise DriverError(f"QEMU could not start the machine: {said}")
                return
            try:
                Qmp.connect(handle.monitor, STARTUP_POLL * 20).close()
            except QmpError:
                continue
            return
        ctx.emit_event("Driver", f"QEMU's monitor did not answer within {STARTUP_TIMEOUT:g}s")

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        monitor = state.get("monitor")
        if not isinstance(monitor, str):
            return None
        proc = SupervisedProcess.recover(ctx, state)
        if proc is None:
            return None
        return QemuHandle(proc, Path(monitor), bool(state.get("graceful_shutdown", False)))

    # -- cleanup --------------------------------------------------------------------------------

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        """Remove QEMU's monitor socket (an image outside the task dir had a throwaway overlay, gone with QEMU)."""
        for kind, value in ctx.created.items():
            if kind == MONITOR:
                Path(value).unlink(missing_ok=True)

    # -- configuration --------------------------------------------------------------------------

    @staticmethod
    def _task_config(task: Task, ctx: TaskContext) -> TaskConfig:
        try:
            return TaskConfig.from_mapping(task.config)
        except ValueError as exc:
            raise DriverError(f"job.group[{ctx.group_name}].task[{ctx.task_name}].{exc}") from None

    def _images(self, config: TaskConfig, ctx: TaskContext) -> dict[str, tuple[Path, bool]]:
        """The files the task boots, each with whether it lies outside the task's directories.

        :raises DriverError: one is missing, or outside the task directory and the plugin's ``image_paths``.
        """
        found = {}
        for key in ("image_path", "kernel", "initrd"):
            value = getattr(config, key)
            if value:
                found[key] = self._image(ctx, key, value)
        return found

    def _image(self, ctx: TaskContext, key: str, value: str) -> tuple[Path, bool]:
        try:
            path, shared = resolve_in_task_dir(ctx.task_dir, value), False
        except ValueError:
            path, shared = Path(value).resolve(), True
            allowed = [root.resolve() for root in self.config.image_paths]
            if not Path(value).is_absolute() or not any(path.is_relative_to(root) for root in allowed):
                raise DriverError(f"{_path(ctx, key)}: {value} is outside the task directory and the directories "
                                  f"[plugin.qemu] image_paths allows ({', '.join(map(str, allowed)) or 'none'})"
                                  ) from None
        if not path.is_file():
            raise DriverError(f"{_path(ctx, key)}: no such file: {value}")
        return path, shared


def _path(ctx: TaskContext, key: str) -> str:
    return f"job.group[{ctx.group_name}].task[{ctx.task_name}].config.{key}"


def task_user(task: Task) -> TaskUser | None:
    """Whom QEMU runs as: the task's ``user``, else ``nobody``; None when herder is not root and the task
    names no user (QEMU then runs as herder's own user, which is not root either).

    :raises DriverError: no such user on this host.
    """
    name = task.user or (DEFAULT_USER if os.geteuid() == 0 else "")
    return TaskUser.lookup(name) if name else None


def _relative(ctx: TaskContext, path: Path) -> str:
    """A path of the task directory as QEMU, in it, reaches it (``local``, ``../alloc``)."""
    return os.path.relpath(path, ctx.task_dir.dir)


def _seen(ctx: TaskContext, path: Path, shared: bool) -> str:
    """A boot file as QEMU is given it: one of ``image_paths`` as it is, one of the task's (resolved: its
    links followed and checked) relative to the task directory."""
    return str(path) if shared else os.path.relpath(path, ctx.task_dir.dir.resolve())


def _guest_port(config: TaskConfig, label: str, to: int | None, host_port: int) -> int:
    """The guest port a host port is forwarded to: ``port_map``, else the port's ``to``, else the same port."""
    return config.port_map.get(label) or to or host_port


def _forwarded_from(ctx: TaskContext, port: AllocatedPort) -> str:
    """Where a ``hostfwd`` rule listens, ``ADDRESS:PORT``: in the host's network, the port's host address
    and port; in the allocation's namespace, the port inside it (its ``to``, else the host port, as in
    Nomad), on every address of the namespace: the CNI plugins carry the host port there."""
    if ctx.network is not None:
        return f":{port.to or port.value}"
    return f"{_host_ip(port.host_ip)}:{port.value}"


def _host_ip(host_ip: str) -> str:
    """The host address of a ``hostfwd`` rule: QEMU's user network forwards from IPv4 addresses only."""
    try:
        return host_ip if ipaddress.ip_address(host_ip).version == 4 else ""
    except ValueError:
        return ""


def _stderr_tail(ctx: TaskContext, size: int = 2000) -> list[str]:
    """The last lines QEMU wrote to the task's stderr log."""
    files = sorted(ctx.task_dir.logs_dir.glob(f"{ctx.task_name}.stderr.*"),
                   key=lambda path: int(path.suffix[1:]) if path.suffix[1:].isdigit() else -1)
    if not files:
        return []
    with files[-1].open("rb") as file:
        file.seek(max(0, file.seek(0, os.SEEK_END) - size))
        return [line.strip() for line in file.read().decode(errors="replace").splitlines() if line.strip()]
