"""An allocation's network namespace, owned by a pause container, as Nomad's docker driver does it.

A container can join another container's network (``network_mode =
"container:<id>"``) but not a namespace by path. So for an allocation in
bridge mode the driver starts a pause container of the ``infra_image`` with
``network_mode = "none"`` (a namespace with only a loopback): herder gives its
namespace (``/proc/<pid>/ns/net``) a name of its own at once, runs the CNI
plugins there, the other drivers' tasks enter it by that name, and every docker
task of the allocation joins the pause container. The joining containers share its hostname, ``/etc/hosts`` and
``resolv.conf`` too, which is why the group's hostname and DNS are set on it.

The pause container is named after the allocation and labelled with its id, its
directory and :data:`PAUSE_LABEL`: a restarted herder gets the running one back
for an allocation it reattaches to, finds it by label to remove it for an
allocation that is over, and each time the driver fingerprints the daemon it
removes those of allocations whose directory is gone (collected while no herder
ran, or never recorded: a herder killed as it made one).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from herder import Alloc, NetworkDNS, NetworkIsolation, RecoverableError
from herder_docker.config import PluginConfig
from herder_docker.errors import daemon_error
from herder_docker.handle import LOG_DRIVER, running_container
from herder_docker.images import Images

log = logging.getLogger(__name__)

ALLOC_LABEL = "herder.alloc_id"
ALLOC_DIR_LABEL = "herder.alloc_dir"
PAUSE_LABEL = "herder.pause"
SANDBOX_ID = "docker_sandbox_container_id"
"""The label of :class:`herder.NetworkIsolation` naming the pause container (Nomad's name)."""


def pause_name(alloc_id: str) -> str:
    return f"herder_init_{alloc_id}"


class PauseContainers:
    """The pause containers of this node's allocations in bridge mode."""

    def __init__(self, client: Callable[[], docker.DockerClient], images: Images, config: PluginConfig) -> None:
        self._client = client
        self._images = images
        self._config = config

    def create(self, alloc: Alloc, hostname: str, dns: NetworkDNS | None) -> NetworkIsolation:
        """The allocation's pause container, started unless it runs already (herder restarted).

        :raises RecoverableError: the daemon is out of reach or failed (it may come back).
        :raises DriverError: the daemon refused the container, or the infra image cannot be had.
        """
        client = self._client()
        name = pause_name(alloc.id)
        try:
            # One that no longer runs is a namespace that lost its interfaces with its process: replaced.
            container = running_container(client, name)
            if container is None:
                self._images.ensure_kept(self._config.infra_image, timeout=self._config.infra_image_pull_timeout,
                                         progress=lambda message, details: log.info("%s", message))
                container = self._start(client, name, alloc, hostname, dns)
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise daemon_error(f"cannot start the pause container of allocation {alloc.id}", exc) from exc
        return _isolation(container)

    def _start(self, client: docker.DockerClient, name: str, alloc: Alloc, hostname: str,
               dns: NetworkDNS | None) -> Any:
        options: dict[str, Any] = {
            "name": name,
            "labels": {ALLOC_LABEL: alloc.id, ALLOC_DIR_LABEL: str(alloc.dir), PAUSE_LABEL: "true"},
            "network_mode": "none",
            # As Nomad: the pause container runs until herder stops it, a restarted daemon included.
            "restart_policy": {"Name": "unless-stopped"},
            "log_config": LOG_DRIVER,
            # It only sleeps: it needs no capability, no writable root and few processes.
            "cap_drop": ["ALL"],
            "security_opt": ["no-new-privileges"],
            "read_only": True,
            "pids_limit": 16,
            "mem_limit": "32m",
            "detach": True,
        }
        if hostname:
            options["hostname"] = hostname
        if dns is not None:
            options |= {key: list(value) for key, value in
                        (("dns", dns.servers), ("dns_search", dns.searches), ("dns_opt", dns.options)) if value}
        try:
            container = client.containers.create(self._config.infra_image, **options)
        except docker.errors.APIError as exc:
            if exc.status_code != 409:
                raise
            # Another call made it between our look and our create: use that one.
            container = client.containers.get(name)
        if container.status != "running":
            container.start()
        container.reload()
        return container

    def destroy(self, alloc: Alloc, isolation: NetworkIsolation) -> None:
        """Remove the allocation's pause container: the one ``isolation`` names, and any other
        labelled with the allocation (a herder killed before it kept the name). Idempotent."""
        client = self._client()
        try:
            ids = {isolation.labels.get(SANDBOX_ID, "")} | {
                str(found["Id"]) for found in client.api.containers(
                    all=True, quiet=True, filters={"label": [f"{ALLOC_LABEL}={alloc.id}", PAUSE_LABEL]})}
            for container_id in sorted(ids - {""}):
                _remove(client, container_id)
        except (docker.errors.APIError, requests.RequestException) as exc:
            raise daemon_error(f"cannot remove the pause container of allocation {alloc.id}", exc) from exc

    def sweep(self) -> None:
        """Remove the pause containers of allocations whose directory is gone: no herder will ask
        for them again. Failures are logged; the next herder tries again."""
        try:
            client = self._client()
            for found in client.api.containers(all=True, filters={"label": PAUSE_LABEL}):
                alloc_dir = (found.get("Labels") or {}).get(ALLOC_DIR_LABEL, "")
                if alloc_dir and not Path(alloc_dir).exists():
                    log.info("removing pause container %s of an allocation that is gone (%s)",
                             str(found["Id"])[:12], alloc_dir)
                    _remove(client, str(found["Id"]))
        except (docker.errors.DockerException, requests.RequestException, RecoverableError, OSError) as exc:
            log.warning("cannot remove the pause containers of allocations that are gone: %s", exc)


def _remove(client: docker.DockerClient, container_id: str) -> None:
    """Kill and remove: the pause container holds nothing worth a graceful stop."""
    with contextlib.suppress(docker.errors.NotFound):
        client.api.remove_container(container_id, force=True)


def _isolation(container: Any) -> NetworkIsolation:
    pid = int((container.attrs.get("State") or {}).get("Pid") or 0)
    if pid <= 0:
        raise RecoverableError(f"pause container {container.id[:12]} has no process")
    return NetworkIsolation(path=Path(f"/proc/{pid}/ns/net"), labels={SANDBOX_ID: str(container.id)})
