"""The docker driver: herder's hooks over the Docker SDK for Python."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
import requests

from herder import (
    Alloc,
    AllocNetwork,
    CleanupLater,
    DriverCapabilities,
    DriverError,
    DriverNetwork,
    ExecResult,
    ExecSession,
    Fingerprint,
    NetworkDNS,
    NetworkIsolation,
    RecoverableError,
    Task,
    TaskContext,
    TaskHandle,
    hookimpl,
)
from herder.sdk import resolve_in_task_dir, set_task_dirs, set_var
from herder_docker.config import TASK_SCHEMA, PluginConfig, TaskConfig, image_ref
from herder_docker.errors import daemon_error
from herder_docker.handle import LOG_DRIVER, ContainerOutput, DockerHandle, running_container
from herder_docker.images import Images, auth_refused
from herder_docker.mounts import host_volume_mounts
from herder_docker.network import ALLOC_LABEL, SANDBOX_ID, PauseContainers
from herder_docker.session import DockerExecSession

FINGERPRINT_TIMEOUT = 3.0
RELEASED = "image-released"
"""``ctx.created`` kind: when (epoch seconds) the task stopped using the image herder fetched for it."""
TASK_DIRS = {"alloc_dir": "/alloc", "local_dir": "/local", "secrets_dir": "/secrets"}
DEFAULT_NETWORK_MODES = ("", "default", "bridge")


class DockerDriver:
    """The ``docker`` driver; herder creates it with the ``[plugin.docker]`` table."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = PluginConfig.from_mapping(config)
        self._client: docker.DockerClient | None = None
        self._lock = threading.Lock()
        self._seen = False
        self._sweeper: threading.Thread | None = None
        self.images = Images(self.client, self.config.cleanup_image_delay,
                             self.config.pull_timeout)
        self.pause = PauseContainers(self.client, self.images, self.config)

    def client(self) -> docker.DockerClient:
        """The client for task work, created on first use.

        :raises RecoverableError: while the daemon cannot be reached (it may come back).
        """
        with self._lock:
            if self._client is None:
                try:
                    self._client = docker.DockerClient(base_url=self.config.endpoint,
                                                       timeout=int(self.config.timeout))
                except docker.errors.DockerException as exc:
                    raise RecoverableError(f"cannot reach the Docker daemon at {self.config.endpoint}: {exc}") \
                        from exc
            return self._client

    # -- driver description -------------------------------------------------

    @hookimpl
    def herder_driver_fingerprint(self) -> Fingerprint:
        try:
            client = docker.DockerClient(base_url=self.config.endpoint, timeout=int(FINGERPRINT_TIMEOUT))
            try:
                version = client.version()
                bridge = client.networks.get("bridge").attrs
            finally:
                client.close()
        except (docker.errors.DockerException, requests.RequestException) as exc:
            reason = f"cannot reach the Docker daemon at {self.config.endpoint}: {exc}"
            if self._seen:
                return Fingerprint(detected=True, healthy=False, description=reason)
            return Fingerprint(detected=False, healthy=False, description=reason)
        if self._sweeper is None or not self._sweeper.is_alive():
            # The daemon answers: the pause containers of allocations that are gone can go (collected
            # while no herder ran, or kept by no record: a herder killed as it made one). In the
            # background: a fingerprint returns within seconds.
            self._sweeper = threading.Thread(target=self.pause.sweep, name="docker-pause-sweep", daemon=True)
            self._sweeper.start()
        self._seen = True
        attributes = {"driver.docker.version": str(version.get("Version", ""))}
        bridge_ip = _bridge_ip(bridge)
        if bridge_ip:
            attributes["driver.docker.bridge_ip"] = bridge_ip
        return Fingerprint(detected=True, healthy=True, description="healthy", attributes=attributes)

    @hookimpl
    def herder_driver_task_schema(self) -> dict[str, Any]:
        return TASK_SCHEMA

    @hookimpl
    def herder_driver_capabilities(self) -> DriverCapabilities:
        return DriverCapabilities(network_isolation=frozenset({"host", "group"}), volume_mounts=True)

    # -- the allocation's network --------------------------------------------

    @hookimpl
    def herder_alloc_network_create(self, alloc: Alloc, hostname: str, dns: NetworkDNS | None) -> NetworkIsolation:
        """A pause container owns the namespace: a container can only join another container's."""
        return self.pause.create(alloc, hostname, dns)

    @hookimpl
    def herder_alloc_network_destroy(self, alloc: Alloc, isolation: NetworkIsolation) -> None:
        self.pause.destroy(alloc, isolation)

    # -- task start ----------------------------------------------------------

    @hookimpl
    def herder_task_prestart(self, task: Task, ctx: TaskContext) -> None:
        """Check what the task asks for, set the environment it sees, get its image."""
        config = TaskConfig.from_mapping(task.config)
        if config.volumes and not self.config.volumes_enabled:
            raise DriverError("volumes are not allowed: set [plugin.docker] volumes_enabled = true")
        if config.privileged and not self.config.allow_privileged:
            raise DriverError("privileged containers are not allowed: set [plugin.docker] allow_privileged = true")
        if ctx.network is not None:
            _check_group_network(config, ctx.network)
        else:
            refusal = self.config.network_mode_refusal(config.network_mode)
            if refusal:
                raise DriverError(refusal)
        self._check_nomad_keys(config, ctx)
        set_task_dirs(ctx.env, TASK_DIRS["alloc_dir"], TASK_DIRS["local_dir"], TASK_DIRS["secrets_dir"])
        if ctx.network is None:  # in the allocation's namespace herder has set the ports as Nomad does
            for port in ctx.ports:
                set_var(ctx.env, f"PORT_{port.label}",
                        str(self._container_port(config, port.label, port.to, port.value)))
        tarball = self._tarball(config, ctx) if config.load else None

        def progress(message: str, details: dict[str, int]) -> None:
            ctx.emit_event("Driver", message, image=config.image_ref, progress=details)

        def ensure(auth: Mapping[str, str] | None) -> bool:
            return self.images.ensure(config.image_ref, _user(ctx), force_pull=config.force_pull, tarball=tarball,
                                      progress=progress, auth=auth)

        try:
            try:
                fetched = ensure(config.auth)
            except DriverError as exc:
                if not (config.auth and config.auth_soft_fail and auth_refused(exc)):
                    raise
                # As Nomad's auth_soft_fail: the image may well be public.
                ctx.emit_event("Driver", f"pulling {config.image_ref} without the refused credentials: {exc}")
                fetched = ensure(None)
        except (DriverError, RecoverableError):
            raise
        except Exception as exc:
            raise daemon_error(f"cannot get image {config.image_ref}", exc) from exc
        if fetched:
            ctx.created.add("image", config.image_ref)

    def _check_nomad_keys(self, config: TaskConfig, ctx: TaskContext) -> None:
        """What the plugin configuration allows of Nomad 1.x's keys, and a warning for those ignored."""
        labels = {port.label for port in ctx.ports}
        unknown = [label for label in config.ports or () if label not in labels]
        if unknown:
            known = ", ".join(sorted(labels)) or "none"
            raise DriverError(f"ports: {', '.join(unknown)} not a port of the task's network (ports: {known})")
        try:
            self.config.capabilities(config.cap_add, config.cap_drop)
        except ValueError as exc:
            raise DriverError(str(exc)) from None
        if config.sysctl and not self.config.allow_sysctl:
            raise DriverError("sysctl is not allowed: set [plugin.docker] allow_sysctl = true")
        # Also a bind inside the task directory, which Nomad lets through: a task may swap the path for a
        # link between the check and Docker's bind, which follows it.
        if any(mount.get("type", "volume") != "tmpfs" for mount in config.mount) and not self.config.volumes_enabled:
            raise DriverError("bind and volume mounts (mount, mounts) are not allowed: "
                              "set [plugin.docker] volumes_enabled = true")
        if config.ignored:
            ctx.emit_event("Driver", f"ignoring config keys herder's docker driver does not implement: "
                                     f"{', '.join(config.ignored)}", ignored=list(config.ignored))

    @staticmethod
    def _container_port(config: TaskConfig, label: str, to: int | None, host_port: int) -> int:
        """The port the task listens on: ``port_map``, else the port's ``to``, else the host port."""
        return (config.port_map or {}).get(label) or to or host_port

    @staticmethod
    def _tarball(config: TaskConfig, ctx: TaskContext) -> Path:
        try:
            path = resolve_in_task_dir(ctx.task_dir, config.load)
        except ValueError as exc:
            raise DriverError(f"load: {exc}") from exc
        if not path.is_file():
            raise DriverError(f"load: no image tarball at {config.load} in the task directory")
        return path

    @hookimpl
    def herder_task_start(self, task: Task, ctx: TaskContext) -> TaskHandle:
        config = TaskConfig.from_mapping(task.config)
        client = self.client()
        name = f"{task.name}-{ctx.alloc_id}"
        try:
            container = running_container(client, name)
            reused = container is not None
            if not reused:
                container = client.containers.create(**self._create_options(task, ctx, config, name))
            ctx.created.add("container", container.id)
            if reused:
                output = self._output_from_now(client, container, ctx)
            else:
                output = ContainerOutput(client, container.id, ctx.stdout, ctx.stderr)  # before the start: every byte
                try:
                    container.start()
                    container.reload()
                except BaseException:
                    output.close()
                    raise
        except docker.errors.ImageNotFound as exc:
            raise DriverError(f"image {config.image_ref} not found: {exc.explanation}") from exc
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise daemon_error(f"cannot start container {name}", exc) from exc
        return DockerHandle(client, container.id, self._network(container.attrs, config, ctx), output)

    @staticmethod
    def _output_from_now(client: docker.DockerClient, container: Any, ctx: TaskContext) -> ContainerOutput:
        """Copy what a container that was running already (herder restarted) writes from now on.

        The daemon keeps an attach stream to a stopped container open until
        it is started again: if the container exited before the attach, the
        stream is let go (what it wrote last, while herder was away, is lost).
        """
        output = ContainerOutput(client, container.id, ctx.stdout, ctx.stderr)
        try:
            container.reload()
        finally:
            if container.status != "running":
                output.close()
        return output

    def _create_options(self, task: Task, ctx: TaskContext, config: TaskConfig, name: str) -> dict[str, Any]:
        binds = {str(getattr(ctx.task_dir, field)): {"bind": target, "mode": "rw"}
                 for field, target in TASK_DIRS.items()}
        for volume in config.volumes:
            host, _, rest = volume.partition(":")
            target, _, mode = rest.partition(":")
            binds[self._volume_source(host, ctx)] = {"bind": target, "mode": mode or "rw"}
        ports: dict[str, tuple[str, int]] = {}
        for port in ctx.ports if ctx.network is None else ():  # in bridge mode CNI's portmap maps them
            if config.ports is not None and port.label not in config.ports:
                continue  # Nomad 1.x publishes only the ports the task's ``ports`` names
            container_port = self._container_port(config, port.label, port.to, port.value)
            for protocol in ("tcp", "udp"):
                ports[f"{container_port}/{protocol}"] = (port.host_ip, port.value)
        command = [config.command, *config.args] if config.command else list(config.args) or None
        # Nomad: ``memory`` is the reservation and the hard limit, unless ``memory_max``
        # (or the older ``memory_hard_limit``) raises the hard limit above it; -1 lifts it.
        hard = task.resources.memory_max or config.memory_hard_limit or task.resources.memory
        memory: str | int = f"{hard}m" if hard > 0 else 0
        options: dict[str, Any] = {
            "image": config.image_ref,
            "command": command,
            "name": name,
            "environment": dict(ctx.env),
            "labels": {**(config.labels or {}), ALLOC_LABEL: ctx.alloc_id, "herder.task": task.name},
            "volumes": binds,
            "ports": ports,
            "mem_limit": memory,
            "memswap_limit": memory or -1,
            "cpu_shares": max(2, task.resources.cpu),
            "privileged": config.privileged,
            "log_config": LOG_DRIVER,
            "detach": True,
        }
        if hard < 0 or hard > task.resources.memory:
            options["mem_reservation"] = f"{task.resources.memory}m"
        if ctx.cores:  # the CPUs herder reserved for the task alone (resources.cores)
            options["cpuset_cpus"] = ",".join(str(cpu) for cpu in sorted(ctx.cores))
        options |= self._nomad_options(config, ctx)
        if config.entrypoint is not None:
            options["entrypoint"] = list(config.entrypoint)
        if config.work_dir:
            options["working_dir"] = config.work_dir
        if config.hostname:
            options["hostname"] = config.hostname
        if config.dns_servers:
            options["dns"] = list(config.dns_servers)
        if ctx.network is not None:
            options["network_mode"] = f"container:{ctx.network.labels[SANDBOX_ID]}"
        elif config.network_mode:
            options["network_mode"] = config.network_mode
        if task.user:
            options["user"] = task.user
        return options

    def _nomad_options(self, config: TaskConfig, ctx: TaskContext) -> dict[str, Any]:
        """Container options from Nomad 1.x's keys (``mount``, ``cap_add``, ``ulimit``, ...)."""
        options: dict[str, Any] = {}
        if config.mount or ctx.mounts:
            options["mounts"] = [*host_volume_mounts(ctx.mounts), *(self._mount(mount, ctx) for mount in config.mount)]
        # Docker's default capabilities less those allow_caps leaves out (net_raw by default), as Nomad's;
        # prestart refused a cap_add allow_caps does not allow.
        add, drop = self.config.capabilities(config.cap_add, config.cap_drop)
        if add:
            options["cap_add"] = add
        if drop:
            options["cap_drop"] = drop
        if config.extra_hosts:
            options["extra_hosts"] = dict(host.split(":", 1) for host in config.extra_hosts)
        if config.init:
            options["init"] = True
        if config.ulimit:
            options["ulimits"] = [_ulimit(name, value) for name, value in config.ulimit.items()]
        if config.shm_size:
            options["shm_size"] = config.shm_size
        if config.sysctl:
            options["sysctls"] = {key: str(value) for key, value in config.sysctl.items()}
        return options

    def _mount(self, mount: Mapping[str, Any], ctx: TaskContext) -> docker.types.Mount:
        kind = mount.get("type", "volume")
        source = mount.get("source", "")
        if kind == "bind":
            source = self._volume_source(source, ctx)
        options: dict[str, Any] = {}
        if kind == "tmpfs":
            tmpfs = mount.get("tmpfs_options") or {}
            options = {"tmpfs_size": tmpfs.get("size"), "tmpfs_mode": tmpfs.get("mode")}
        elif kind == "bind":
            options = {"propagation": (mount.get("bind_options") or {}).get("propagation")}
        return docker.types.Mount(target=mount["target"], source=source or None, type=kind,
                                  read_only=bool(mount.get("readonly", False)), **options)

    @staticmethod
    def _volume_source(host: str, ctx: TaskContext) -> str:
        """An absolute host path as is; a relative one in the task directory, as in Nomad."""
        if host.startswith("/"):
            return host
        try:
            path = resolve_in_task_dir(ctx.task_dir, host)
        except ValueError as exc:
            raise DriverError(f"volumes: {exc}") from exc
        path.mkdir(parents=True, exist_ok=True)
        return str(path)

    @staticmethod
    def _network(attrs: Mapping[str, Any], config: TaskConfig, ctx: TaskContext) -> DriverNetwork | None:
        """The container's IP and port map: what ``address_mode = "driver"`` advertises.
        In the allocation's namespace: its address and each port's ``to``, as Nomad."""
        if ctx.network is not None:
            return DriverNetwork(ip=ctx.network.ip, auto_advertise=False,
                                 port_map={p.label: p.to if p.to and p.to > 0 else p.value for p in ctx.ports})
        settings = attrs.get("NetworkSettings") or {}
        ip = settings.get("IPAddress") or next(
            (n.get("IPAddress") for n in (settings.get("Networks") or {}).values() if n.get("IPAddress")), "")
        if not ip:
            return None
        port_map = {p.label: DockerDriver._container_port(config, p.label, p.to, p.value) for p in ctx.ports}
        return DriverNetwork(ip=ip, port_map=port_map,
                             auto_advertise=config.network_mode not in DEFAULT_NETWORK_MODES)

    # -- running task ------------------------------------------------------

    @hookimpl
    def herder_task_exec(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                         timeout: float) -> ExecResult:
        if not isinstance(handle, DockerHandle):
            raise DriverError("not a docker task handle")
        try:
            return handle.exec(command, timeout)
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise daemon_error("exec", exc) from exc

    @hookimpl
    def herder_task_exec_session(self, task: Task, ctx: TaskContext, handle: TaskHandle, command: list[str],
                                 tty: bool) -> ExecSession:
        if not isinstance(handle, DockerHandle):
            raise DriverError("not a docker task handle")
        try:
            return DockerExecSession.start(handle.client.api, handle.id, command, tty)
        except (docker.errors.APIError, requests.RequestException, TimeoutError) as exc:
            raise daemon_error("exec", exc) from exc

    @hookimpl
    def herder_task_recover(self, task: Task, ctx: TaskContext, state: dict[str, Any]) -> TaskHandle | None:
        container_id = str(state.get("container_id") or "")
        if not container_id:
            return None
        client = self.client()
        try:
            container = client.containers.get(container_id)
        except docker.errors.NotFound:
            return None
        if container.status != "running":
            return None
        config = TaskConfig.from_mapping(task.config)
        self.images.ensure(config.image_ref, _user(ctx), force_pull=False, tarball=None,
                           progress=lambda message, details: None)
        try:
            output = self._output_from_now(client, container, ctx)
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise daemon_error(f"cannot attach to container {container_id[:12]}", exc) from exc
        return DockerHandle(client, container_id, self._network(container.attrs, config, ctx), output)

    # -- cleanup -------------------------------------------------------------

    @hookimpl
    def herder_task_cleanup(self, task: Task, ctx: TaskContext) -> None:
        created = ctx.created.items()
        client = self.client()
        for kind, value in created:
            if kind != "container":
                continue
            try:
                client.api.remove_container(value, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except (docker.errors.APIError, requests.RequestException) as exc:
                raise RecoverableError(f"cannot remove container {value[:12]}: {exc}") from exc
        if isinstance(task.config.get("image"), str):  # cleanup also follows a config that failed validation
            self._release_image(image_ref(task.config["image"]), ctx)

    def _release_image(self, image: str, ctx: TaskContext) -> None:
        """Remove an image herder fetched for this task ``cleanup_image_delay`` after the
        task finished. The time it finished is kept in ``ctx.created``, so the wait
        survives herder itself: cleanup is called again when due (:class:`CleanupLater`)."""
        created = ctx.created.items()
        self.images.release(image, _user(ctx))
        if not (self.config.cleanup_image and ("image", image) in created):
            return
        released = next((float(value) for kind, value in created if kind == RELEASED), None)
        if released is None:
            released = time.time()
            ctx.created.add(RELEASED, repr(released))
        wait = released + self.config.cleanup_image_delay - time.time()
        if wait <= 0:
            # Another task may have wanted the image meanwhile: then wait for it too.
            wait = self.images.remove_when_unused(image)
        if wait > 0:
            raise CleanupLater(wait, f"image {image} is removed in {wait:.0f}s unless a task wants it again")


def _check_group_network(config: TaskConfig, network: AllocNetwork) -> None:
    """Refuse what a container joining the allocation's namespace cannot have of its own.

    It shares the pause container's network, hostname and ``resolv.conf``:
    Docker refuses these options then ("conflicting options").
    """
    if SANDBOX_ID not in network.labels:
        raise DriverError(f'the allocation\'s network (mode "{network.mode}") was not made by the docker driver: '
                          "a container can only join another container's network")
    for key, value, instead in (("network_mode", config.network_mode, ""),
                                ("hostname", config.hostname, "set the group network's hostname"),
                                ("dns_servers", config.dns_servers, "set the group network's dns block"),
                                ("extra_hosts", config.extra_hosts, "")):
        if value:
            why = f"; {instead}" if instead else ""
            raise DriverError(f'config.{key} conflicts with the group network mode "{network.mode}": '
                              f"the task joins the allocation's network{why}")


def _bridge_ip(bridge: Mapping[str, Any]) -> str:
    """The bridge network's gateway: given in its IPAM config, or else the subnet's first host
    (Docker gives the bridge interface that address but does not always say so)."""
    for entry in (bridge.get("IPAM") or {}).get("Config") or []:
        if entry.get("Gateway"):
            return str(entry["Gateway"])
        if entry.get("Subnet"):
            return str(next(ipaddress.ip_network(entry["Subnet"], strict=False).hosts()))
    return ""


def _ulimit(name: str, value: str | int) -> docker.types.Ulimit:
    """Nomad's ``ulimit`` value: ``"SOFT:HARD"`` or one number for both."""
    soft, _, hard = str(value).partition(":")
    return docker.types.Ulimit(name=name, soft=int(soft), hard=int(hard or soft))


def _user(ctx: TaskContext) -> str:
    """Who uses an image: one task of one allocation."""
    return f"{ctx.alloc_id}/{ctx.task_name}"
