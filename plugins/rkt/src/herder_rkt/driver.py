"""The rkt driver: App Container images run by the rkt command line, ``rkt run`` supervised like a task process.

- prestart: the task sees its directories at ``/alloc``, ``/local`` and
  ``/secrets``; ports and volumes are checked; ``trust_prefix`` is trusted;
  the image is fetched into rkt's store (a ``.aci`` file of the task
  directory, or a name), and remembered for cleanup when herder brought it.
- start: ``rkt run --uuid-file-save`` in the foreground through
  :class:`herder.sdk.SupervisedProcess`; the pod counts as started once its
  UUID is in the file, within ``start_timeout``. In a group with a network of
  its own, ``rkt run`` (and ``rkt enter``) run in the allocation's namespace,
  and the pod shares it (``--net=host`` there).
- exec: ``rkt enter``; recover: the supervisor's record and the pod's UUID;
  cleanup: ``rkt rm`` of the task's pods, ``rkt image rm`` of the image herder
  fetched once no other task uses it.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import lzma
import os
import shutil
import signal
import tarfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from herder import (
    DriverCapabilities,
    DriverError,
    ExecResult,
    ExecSession,
    Fingerprint,
    RecoverableError,
    Task,
    TaskContext,
    TaskHandle,
    hookimpl,
)
from herder.sdk import (
    ExecProcess,
    SupervisedProcess,
    kill_session,
    resolve_in_task_dir,
    run_capped,
    set_port_vars,
    set_task_dirs,
)
from herder_rkt.cli import UUID, Rkt, RktError, image_ports
from herder_rkt.config import TASK_SCHEMA, PluginConfig, TaskConfig, Volume
from herder_rkt.handle import RktHandle

MIN_VERSION = (1, 0, 0)
VERSION_TIMEOUT = 3.0
UUID_FILE = "rkt.uuid"
"""Where, in the task directory, ``rkt run --uuid-file-save`` writes the pod's UUID."""
UUID_POLL = 0.02
STOP_WAIT = 5.0
"""How long a pod stopped by cleanup has to be seen exited before ``rkt rm``."""
TASK_DIRS = (("alloc", "alloc_dir", "/alloc"), ("local", "local_dir", "/local"), ("secrets", "secrets_dir", "/secrets"))
"""The task's directories as rkt volumes: volume name, ``TaskDir`` field, where the app sees it."""
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FLY = "stage1-fly"
"""The name of rkt's chroot-only stage1 image ends with it (``coreos.com/rkt/stage1-fly``)."""
STDERR_TAIL = 2000
IMAGE_ID_HEX = 64
"""rkt's image ids keep 64 of the SHA-512's 128 hex digits (``fetch`` prints 32 of them)."""


class RktDriver:
    """The ``rkt`` driver; herder creates it with the ``[plugin.rkt]`` table."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = PluginConfig.from_mapping(config)
        self._lock = threading.Lock()
        self._prepared: dict[str, str] = {}
        """task key -> the image id its prestart fetched, for its start."""
        self._users: dict[str, set[str]] = {}
        """image id -> the keys of the tasks of this herder that use it (from prestart to cleanup)."""
        self._fetched: set[str] = set()
        """The images this herder brought into rkt's store."""
        self._fly: bool | None = None

    # -- what the driver needs ------------------------------------------------------------

    def _rkt(self) -> Rkt | None:
        binary = shutil.which(self.config.rkt)
        if binary is None:
            return None
        return Rkt(str(Path(binary).absolute()), dir=self.config.dir, local_config=self.config.local_config,
                   system_config=self.config.system_config)

    def rkt(self) -> Rkt:
        """:raises DriverError: rkt is not there."""
        rkt = self._rkt()
        if rkt is None:
            raise DriverError(f"rkt not found: {self.config.rkt}")
        return rkt

    def stage1_is_fly(self) -> bool:
        """Whether pods run under the ``fly`` stage1 (a chroot: no network, pid or resource isolation).

        Read from the configured stage1: the name in ``stage1_path``'s manifest
        (the first member of the image), or ``stage1_name``. rkt's own default
        stage1 (``coreos``) isolates.
        """
        if self._fly is None:
            if self.config.stage1_name:
                self._fly = FLY in self.config.stage1_name
            elif self.config.stage1_path:
                self._fly = FLY in _image_name(Path(self.config.stage1_path))
            else:
                self._fly = False
        return self._fly

    # -- driver description -------------------------------------------------------------------

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        rkt = self._rkt()
        if rkt is None:
            return Fingerprint(detected=False, healthy=False, description=f"rkt not found: {self.config.rkt}")
        try:
            version = rkt.version(VERSION_TIMEOUT)
        except RktError as exc:
            return Fingerprint(detected=False, healthy=False, description=f"{rkt.binary} does not work: {exc}")
        attributes = {"driver.rkt.version": version.rkt, "driver.rkt.appc.version": version.appc}
        problem = None
        if version.rkt_tuple < MIN_VERSION:
            problem = f"rkt {version.rkt} is too old: the rkt driver needs rkt >= 1.0.0"
        elif os.geteuid() != 0:
            problem = "the rkt driver needs root"
        elif self.config.stage1_path and not os.path.isfile(self.config.stage1_path):
            problem = f"[plugin.rkt] stage1_path {self.config.stage1_path} is not a file"
        if problem:
            return Fingerprint(detected=True, healthy=False, description=problem, attributes=attributes)
        return Fingerprint(detected=True, healthy=True, description="healthy", attributes=attributes)

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return TASK_SCHEMA

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        """``rkt run`` runs in its allocation's network namespace, and its pod shares the network it runs in."""
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}))

    # -- task start ---------------------------------------------------------------------------

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        """Check ports, volumes and insecure options, trust ``trust_prefix``, fetch the image."""
        config = TaskConfig.from_mapping(task.config)
        if config.insecure_options and not self.config.allow_insecure:
            raise DriverError(f"config.insecure_options: {', '.join(config.insecure_options)} not allowed: set "
                              f"[plugin.rkt] allow_insecure = true to let tasks run with rkt's insecure options")
        set_task_dirs(ctx.env, "/alloc", "/local", "/secrets")
        if ctx.network is not None and config.net and not config.host_network:
            raise DriverError(f"config.net: the task's group has a network of its own, which its pod shares: "
                              f"net = {list(config.net)} cannot apply (leave it out)")
        self._check_ports(config, ctx)
        self._volumes(config, ctx)  # refused volumes fail before anything is fetched
        rkt = self.rkt()
        if config.trust_prefix:
            ctx.emit_event("Driver", f"Trusting the signing key of {config.trust_prefix}")
            rkt.trust(config.trust_prefix)
        image = self._fetch(rkt, config, ctx)
        if config.port_map:
            self._map_ports(rkt, config, image, ctx)
        key = _task_key(ctx)
        with self._lock:
            self._prepared[key] = image
            self._users.setdefault(image, set()).add(key)
            fetched = image in self._fetched
        if fetched:
            ctx.created.add("rkt-image", image)

    def _check_ports(self, config: TaskConfig, ctx: TaskContext) -> None:
        """Every port needs a ``port_map`` entry naming the image's port, unless the pod shares the
        network rkt runs in (the host's with ``net = ["host"]``, and always under fly; the allocation's
        namespace in a group network): then the app binds its ``NOMAD_PORT_<label>`` itself.

        :raises DriverError: naming the label.
        """
        labels = {port.label for port in ctx.ports}
        port_map = dict(config.port_map or {})
        for label in sorted(set(port_map) - labels):
            raise DriverError(f"config.port_map.{label}: the task has no port labelled {label!r} "
                              f"(its ports: {', '.join(sorted(labels)) or 'none'})")
        if not self._maps_ports(config, ctx):
            if port_map and not config.host_network:
                shared = "the allocation's network" if ctx.network is not None else "the host's network (fly stage1)"
                ctx.emit_event("Driver", f"the pod shares {shared}: port_map is not used, the app binds its "
                                         "NOMAD_PORT_<label> itself")
            return
        for label in sorted(labels - set(port_map)):
            raise DriverError(f"config.port_map: port {label!r} has no entry: map it to the name of a port of "
                              f'the image, or use net = ["host"]')

    def _map_ports(self, rkt: Rkt, config: TaskConfig, image: str, ctx: TaskContext) -> None:
        """Every ``port_map`` entry names a port of the image; where rkt maps it (a pod with a network of
        its own), ``NOMAD_PORT_<label>`` is the image's port, the one the app listens on.

        :raises DriverError: naming the label whose port the image lacks.
        """
        ports = image_ports(rkt.manifest(image))
        for label, name in sorted((config.port_map or {}).items()):
            if name not in ports:
                raise DriverError(f"config.port_map.{label}: image {config.image} has no port named {name!r} "
                                  f"(its ports: {', '.join(sorted(ports)) or 'none'})")
            if self._maps_ports(config, ctx):
                set_port_vars(ctx.env, label, ports[name])

    def _maps_ports(self, config: TaskConfig, ctx: TaskContext) -> bool:
        """Whether rkt maps the ports (``--port``): only for a pod with a network of its own (not the host's,
        nor under fly, nor the allocation's namespace the pod shares)."""
        return not config.host_network and not self.stage1_is_fly() and ctx.network is None

    def _volumes(self, config: TaskConfig, ctx: TaskContext) -> list[tuple[str, Path, str, bool]]:
        """The pod's volumes: the task's directories, then ``config.volumes``: (name, host path, where
        the app sees it, read-only).

        :raises DriverError: volumes are not enabled, or one is not allowed (naming its path).
        """
        volumes = [(name, getattr(ctx.task_dir, field), target, False) for name, field, target in TASK_DIRS]
        if config.volumes and not self.config.volumes_enabled:
            raise DriverError("config.volumes: volumes are not allowed: set [plugin.rkt] volumes_enabled = true")
        for index, volume in enumerate(config.volumes):
            volumes.append((f"volume-{index}", self._host_path(volume, ctx, index), volume.container,
                            volume.read_only))
        return volumes

    @staticmethod
    def _host_path(volume: Volume, ctx: TaskContext, index: int) -> Path:
        """An absolute host path as it is (volumes are enabled); a relative one inside the task dir."""
        if os.path.isabs(volume.host):
            return Path(volume.host)
        try:
            return resolve_in_task_dir(ctx.task_dir, volume.host)
        except ValueError as exc:
            raise DriverError(f"config.volumes[{index}]: {exc}") from None

    def _fetch(self, rkt: Rkt, config: TaskConfig, ctx: TaskContext) -> str:
        """Bring the image into rkt's store, unless it is there; its full id. One herder brought there is
        remembered, for cleanup.

        An image file's id is computed as rkt computes it (:func:`aci_id`), and a name is looked for
        among the store's images: what the store holds costs one ``rkt image list``.
        """
        stored = rkt.images()
        if config.image.endswith(".aci"):  # an image file of the task directory (an artifact, say)
            try:
                path = resolve_in_task_dir(ctx.task_dir, config.image)
            except ValueError as exc:
                raise DriverError(f"config.image: {exc}") from None
            if not path.is_file():
                raise DriverError(f"config.image: {config.image} is not a file in the task directory")
            try:
                image_id = aci_id(path)
            except (OSError, ValueError) as exc:
                raise DriverError(f"config.image: {config.image} is not an image: {exc}") from None
            if any(image.id == image_id for image in stored):
                return image_id
            self._rkt_fetch(rkt, str(path), config, ctx)
        else:
            names = {config.image, f"{config.image}:latest"}
            found = sorted((image for image in stored if image.name in names), key=lambda image: image.import_time)
            if found:
                return found[-1].id
            short = self._rkt_fetch(rkt, config.image, config, ctx)
            image_id = next((image.id for image in rkt.images() if image.id.startswith(short)), short)
        with self._lock:
            self._fetched.add(image_id)
        return image_id

    @staticmethod
    def _rkt_fetch(rkt: Rkt, source: str, config: TaskConfig, ctx: TaskContext) -> str:
        """``rkt fetch``: the short id of the image it brought into the store."""
        ctx.emit_event("Driver", f"Downloading image {config.image}")
        try:
            return rkt.fetch(source, config.insecure_options)
        except RktError as exc:
            if exc.exit_code == -1:  # timed out, or could not be run: may work next time
                raise RecoverableError(str(exc)) from exc
            raise

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        config = TaskConfig.from_mapping(task.config)
        rkt = self.rkt()
        with self._lock:
            image = self._prepared.get(_task_key(ctx))
        if image is None:
            raise DriverError("the task was not prepared: herder_task_prestart fetches its image")
        self._remove_exited_pods(rkt, ctx)  # of earlier runs of the task: they hold mounts
        uuid_file = ctx.task_dir.dir / UUID_FILE
        uuid_file.unlink(missing_ok=True)
        argv = self._run_argv(rkt, config, task, ctx, image, uuid_file)
        proc = SupervisedProcess.spawn(task, ctx, argv, env={"PATH": os.environ.get("PATH", DEFAULT_PATH)},
                                       cwd=ctx.task_dir.dir, default_signal=signal.SIGTERM, netns=_netns(ctx))
        uuid = self._await_uuid(rkt, proc, uuid_file, ctx)
        ctx.created.add("rkt-pod", uuid)
        return RktHandle(proc, rkt, uuid)

    def _run_argv(self, rkt: Rkt, config: TaskConfig, task: Task, ctx: TaskContext, image: str,
                  uuid_file: Path) -> list[str]:
        """``rkt [global] run [pod options] IMAGE [app options] [--exec CMD] [-- ARGS]``."""
        options = [f"--uuid-file-save={uuid_file}"]
        if self.config.stage1_path:
            options.append(f"--stage1-path={self.config.stage1_path}")
        elif self.config.stage1_name:
            options.append(f"--stage1-name={self.config.stage1_name}")
        for name, host, target, read_only in self._volumes(config, ctx):
            options += [f"--volume={name},kind=host,source={host},readOnly={str(read_only).lower()}",
                        f"--mount=volume={name},target={target}"]
        options += [f"--set-env={name}={value}" for name, value in ctx.env.items()]
        options += self._network_options(config, ctx)
        if self._maps_ports(config, ctx):
            by_label = {port.label: port for port in ctx.ports}
            options += [f"--port={name}:{by_label[label].host_ip}:{by_label[label].value}"
                        for label, name in (config.port_map or {}).items()]
        # Per-app options follow the image they apply to.
        app = [f"--memory={task.resources.memory}Mi", f"--cpu={task.resources.cpu}m"]
        if task.user:
            app.append(f"--user={task.user}")
        if config.command:
            app.append(f"--exec={config.command}")
        if config.args:
            app += ["--", *config.args]
        return rkt.argv("run", *options, image, *app, insecure=config.insecure_options, debug=config.debug)

    @staticmethod
    def _network_options(config: TaskConfig, ctx: TaskContext) -> list[str]:
        """``--net`` and the DNS options: in the allocation's namespace, the pod shares it (``--net=host``,
        rkt running there), with the group's ``dns`` where the task's config sets none."""
        network, dns = ctx.network, ctx.network.dns if ctx.network is not None else None
        net = ["host"] if network is not None else list(config.net or ())
        servers = config.dns_servers or (list(dns.servers) if dns else [])
        searches = config.dns_search_domains or (list(dns.searches) if dns else [])
        return [*([f"--net={','.join(net)}"] if net else []), *(f"--dns={server}" for server in servers),
                *(f"--dns-search={domain}" for domain in searches),
                *(f"--dns-opt={option}" for option in (dns.options if dns else ()))]

    def _await_uuid(self, rkt: Rkt, proc: SupervisedProcess, uuid_file: Path, ctx: TaskContext) -> str:
        """The pod's UUID, once ``rkt run`` wrote it (while it prepares the pod, before the app starts).

        :raises DriverError: ``rkt run`` ended without a pod (rkt's message from the task's stderr).
        :raises RecoverableError: no UUID within ``start_timeout``: the pod is killed and removed.
        """
        deadline = time.monotonic() + self.config.start_timeout
        while True:
            uuid = _read_uuid(uuid_file)
            if uuid:
                return uuid
            result = proc.wait(UUID_POLL)
            if result is not None:
                uuid = _read_uuid(uuid_file)
                if uuid:  # the pod ran and exited already
                    return uuid
                tail = _stderr_tail(ctx)
                raise DriverError(f"rkt run ended (exit code {result.exit_code}) without starting a pod"
                                  + (f": {tail}" if tail else ""))
            if time.monotonic() > deadline:
                break
        proc.kill(0, signal.SIGKILL)
        uuid = _read_uuid(uuid_file)
        with contextlib.suppress(RktError):
            if uuid:
                rkt.rm(uuid)
            else:  # the pod rkt was preparing, whose UUID nobody knows: rkt collects abandoned pods
                rkt.call("gc", "--grace-period=0s")
        raise RecoverableError(f"rkt run did not start the pod within {self.config.start_timeout:g}s "
                               "([plugin.rkt] start_timeout): it was killed")

    def _remove_exited_pods(self, rkt: Rkt, ctx: TaskContext) -> None:
        for kind, uuid in ctx.created.items():
            if kind == "rkt-pod":
                with contextlib.suppress(RktError):
                    pod = rkt.status(uuid)
                    if pod is not None and not pod.running:
                        rkt.rm(uuid)

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        uuid = state.get("pod")
        if not isinstance(uuid, str) or not UUID.match(uuid):
            return None
        rkt = self.rkt()
        proc = SupervisedProcess.recover(ctx, state, default_signal=signal.SIGTERM)
        if proc is None:
            # No supervisor knows rkt run's process: it was killed with its group, but the pod must
            # not run on, unwatched, beside the task's next run.
            with contextlib.suppress(RktError):
                pod = rkt.status(uuid)
                if pod is not None and pod.running:
                    rkt.stop(uuid, force=True)
                    rkt.wait_exited(uuid, STOP_WAIT)
            return None
        with contextlib.suppress(RktError):  # its image stays in use until cleanup
            pod = rkt.status(uuid)
            with self._lock:
                for image in pod.image_ids if pod is not None else ():
                    self._users.setdefault(image, set()).add(_task_key(ctx))
        return RktHandle(proc, rkt, uuid)

    # -- running task ---------------------------------------------------------------------------

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        """``rkt enter``: the command runs in the pod's app (under fly, chrooted into its root filesystem).

        :raises DriverError: see :meth:`_enter_argv`.
        """
        return run_capped(self._enter_argv(task, handle, command), env=None, cwd=None, timeout=timeout,
                          netns=_netns(ctx))

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        """``rkt enter`` under a pseudo-terminal (or on pipes): under fly, rkt execs its stage1's ``enter``,
        which chroots into the app and execs the command (with the app's environment), so the process
        herder started is the command, the leader of a session of its own.

        :raises DriverError: as :meth:`herder_task_exec`.
        """
        argv = self._enter_argv(task, handle, command)
        try:
            return EnteredCommand.start(argv, env=None, cwd=None, tty=tty, netns=_netns(ctx))
        except OSError as exc:
            raise DriverError(f"cannot run rkt enter: {exc}") from exc

    def _enter_argv(self, task: Task, handle: TaskHandle, command: list[str]) -> list[str]:
        """``rkt enter UUID COMMAND...``.

        :raises DriverError: the task has a ``user``: ``rkt enter`` has no way to take it, and runs
            every command as root.
        """
        if not isinstance(handle, RktHandle):
            raise DriverError(f"not a task of the rkt driver: {handle!r}")
        if task.user:
            raise DriverError(f"exec refused: the task runs as user {task.user!r}, and rkt enter would run the "
                              f"command as root")
        return self.rkt().argv("enter", handle.id, *command)

    # -- cleanup --------------------------------------------------------------------------------

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        """Remove the task's pods, then the images herder fetched that no other task uses; each step a
        no-op once done."""
        created = ctx.created.items()
        key = _task_key(ctx)
        with self._lock:
            self._prepared.pop(key, None)
            for users in self._users.values():
                users.discard(key)
        pods = [value for kind, value in created if kind == "rkt-pod"]
        images = [value for kind, value in created if kind == "rkt-image"]
        if not pods and not images:
            return
        rkt = self.rkt()
        for uuid in pods:
            self._remove_pod(rkt, uuid)
        for image in images:
            with self._lock:
                if self._users.get(image):
                    continue  # another task of this herder uses it: the last one removes it
            if any(image in pod.image_ids for pod in rkt.pods()):
                continue  # a pod of someone else's uses it
            rkt.image_rm(image)
            with self._lock:
                self._fetched.discard(image)
                self._users.pop(image, None)

    @staticmethod
    def _remove_pod(rkt: Rkt, uuid: str) -> None:
        """``rkt rm``, stopping the pod first if something of it still runs.

        :raises RecoverableError: it does not stop in time.
        """
        pod = rkt.status(uuid)
        if pod is None:
            return
        if pod.running:
            rkt.stop(uuid, force=True)
            pod = rkt.wait_exited(uuid, STOP_WAIT)
            if pod is not None and pod.running:
                raise RecoverableError(f"pod {uuid} still runs {STOP_WAIT:g}s after rkt stop --force")
        try:
            rkt.rm(uuid)
        except RktError as exc:
            raise RecoverableError(str(exc)) from exc


class EnteredCommand(ExecProcess):
    """The command ``rkt enter`` became: closing it ends its whole session, not only its process
    group, since a shell on a terminal puts each job it starts in a group of its own."""

    def close(self) -> None:
        # Once reaped (wait() saw it exit), the command's number may be another process's.
        kill_session(self.pid, signal.SIGKILL, leader_gone=self.wait(0) is not None)
        super().close()


def _netns(ctx: TaskContext) -> Path | None:
    """The allocation's network namespace, where rkt runs for the task; None for the host's network."""
    return ctx.network.path if ctx.network is not None else None


def _task_key(ctx: TaskContext) -> str:
    return f"{ctx.alloc_id}/{ctx.task_name}"


def _read_uuid(path: Path) -> str:
    """The UUID in the file ``rkt run`` writes (no newline); empty while it is missing or partly written."""
    try:
        text = path.read_text().strip()
    except OSError:
        return ""
    return text if UUID.match(text) else ""


def _stderr_tail(ctx: TaskContext) -> str:
    """The end of the task's newest stderr log file: rkt's own message when ``rkt run`` failed."""
    logs = sorted(ctx.task_dir.logs_dir.glob(f"{ctx.task_name}.stderr.*"),
                  key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else -1)
    if not logs:
        return ""
    try:
        text = logs[-1].read_bytes()[-STDERR_TAIL:].decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip() and "will use default gid" not in line]
    return "; ".join(lines[-3:])


def aci_id(path: Path) -> str:
    """The id rkt gives an ACI file: ``sha512-`` and the first half of the SHA-512 of its tar,
    uncompressed (gzip, bzip2 or xz, as rkt reads them).

    :raises ValueError: not a tar.
    """
    with path.open("rb") as raw:
        magic = raw.read(6)
    opener: Any = open
    if magic.startswith(b"\x1f\x8b"):
        opener = gzip.open
    elif magic.startswith(b"BZh"):
        opener = bz2.open
    elif magic.startswith(b"\xfd7zXZ"):
        opener = lzma.open
    digest = hashlib.sha512()
    with opener(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    if not tarfile.is_tarfile(path):
        raise ValueError("not a tar archive")
    return f"sha512-{digest.hexdigest()[:IMAGE_ID_HEX]}"


def _image_name(path: Path) -> str:
    """The ``name`` in an ACI file's manifest (rkt's images put it first); empty if unreadable."""
    try:
        with tarfile.open(path, "r|*") as archive:
            for member in archive:
                if member.name.lstrip("./") == "manifest":
                    data = archive.extractfile(member)
                    return str(json.load(data).get("name", "")) if data is not None else ""
    except (OSError, tarfile.TarError, ValueError):
        pass
    return ""
