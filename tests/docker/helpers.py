"""Helpers for the docker driver's tests: test images, job documents, and runs that clean up after themselves."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.require import require
from tests.support.running import Run, make_config, start_job

try:
    import docker
    import docker.errors
except ImportError:  # the fixtures skip (or fail, under HERDER_REQUIRE) before any helper needs it
    docker = None  # type: ignore[assignment]

BUSYBOX = Path("/bin/busybox")
IMAGE = "herder-test/busybox:1"
PAUSE_IMAGE = "herder-test/pause:1"
ALLOC_LABEL = "herder.alloc_id"

Docker = Any  # docker.DockerClient


# -- images ------------------------------------------------------------------------


def busybox_digest() -> str:
    return hashlib.sha256(BUSYBOX.read_bytes()).hexdigest()


def build_image(client: Docker, tag: str, directory: Path, extra: str = "") -> Any:
    """Build ``tag`` FROM scratch with the host's static busybox, through the SDK; returns the image.

    ``extra`` is appended to the Dockerfile (a ``LABEL`` gives an image an id of its own).
    """
    require("docker", BUSYBOX.exists(), f"{BUSYBOX} is missing (Debian package busybox-static)")
    shutil.copy2(BUSYBOX, directory / "busybox")
    (directory / "Dockerfile").write_text(
        "FROM scratch\n"
        "COPY busybox /bin/busybox\n"
        'RUN ["/bin/busybox", "--install", "-s", "/bin"]\n'
        f"LABEL herder.test.busybox.sha256={busybox_digest()}\n"
        f"{extra}"
    )
    image, _ = client.images.build(path=str(directory), tag=tag, rm=True, forcerm=True, pull=False)
    return image


def image_exists(client: Docker, ref: str) -> bool:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        return False
    return True


def remove_image(client: Docker, ref: str) -> None:
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.remove(ref, force=True)


def save_image(client: Docker, ref: str, path: Path) -> Path:
    """``docker save`` ``ref`` into the tarball ``path``."""
    with path.open("wb") as out:
        for chunk in client.images.get(ref).save(named=True):
            out.write(chunk)
    return path


# -- jobs --------------------------------------------------------------------------


def job_name(prefix: str) -> str:
    """A job name no other test (or xdist worker) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def docker_job(name: str, config: dict[str, Any], *, type: str = "service", count: int = 1,
               ports: list[dict[str, Any]] | None = None, memory: int = 64, attempts: int = 0,
               **task: Any) -> dict[str, Any]:
    """A canonical job document: one group of ``count`` with one docker task named ``t``.

    The restart policy fails the task at its first exit unless ``attempts`` says otherwise.
    """
    return {"job": {
        "name": name, "type": type,
        "groups": [{
            "name": "g", "count": count,
            "restart": {"attempts": attempts, "interval": "1m", "delay": "0s", "mode": "fail"},
            "tasks": [{
                "name": "t", "driver": "docker", "config": config,
                "resources": {"cpu": 100, "memory": memory, "network": {"ports": ports or []}},
                **task,
            }],
        }],
    }}


def sh(script: str, image: str = IMAGE, **config: Any) -> dict[str, Any]:
    """A docker task config running ``sh -c SCRIPT``."""
    return {"image": image, "command": "sh", "args": ["-c", script], **config}


def containers_of(client: Docker, alloc_id: str) -> list[Any]:
    """Every container (running or not) the driver made for the allocation."""
    return list(client.containers.list(all=True, filters={"label": f"{ALLOC_LABEL}={alloc_id}"}))


def container_ids(client: Docker, alloc_id: str) -> list[str]:
    """The IDs of :func:`containers_of`, from the list alone: a container removed meanwhile fails no inspection."""
    listed = client.api.containers(all=True, quiet=True, filters={"label": f"{ALLOC_LABEL}={alloc_id}"})
    return [str(container["Id"]) for container in listed]


def events_of(run: Run, type: str, task: str = "t") -> list[Any]:
    return [r.event for r in run.events if r.event.type == type and r.task == task]


class DockerJobs:
    """Starts jobs in-process; at the end of the test stops them and removes every container they made."""

    def __init__(self, client: Docker, data_dir: Path) -> None:
        self.client = client
        self.data_dir = data_dir
        self.runs: list[tuple[Run, Callable[..., str]]] = []

    def start(self, job: dict[str, Any], *, plugin: dict[str, dict[str, Any]] | None = None,
              **settings: Any) -> tuple[Run, Callable[..., str]]:
        """Place ``job`` (a canonical document) and run it in a thread; ``plugin``: the plugin tables,
        ``settings``: other fields of the configuration (``services_backend``, ``consul``)."""
        config = dataclasses.replace(make_config(self.data_dir, plugin={"docker": {}, **(plugin or {})}), **settings)
        run, wait = start_job(json.dumps(job), self.data_dir, fmt="json", config=config)
        self.runs.append((run, wait))
        return run, wait

    def run(self, job: dict[str, Any], *, timeout: float = 60, **kwargs: Any) -> Run:
        """Run ``job`` to the end (failing the test if it takes longer than ``timeout``)."""
        run, wait = self.start(job, **kwargs)
        wait(timeout)
        return run

    def close(self) -> None:
        for run, wait in self.runs:
            run.runner.stop()
            with contextlib.suppress(AssertionError):  # the test reports a run that did not end
                wait(60)
        for run, _ in self.runs:
            for alloc in run.runner.allocs:
                for container in containers_of(self.client, alloc.alloc.id):
                    with contextlib.suppress(docker.errors.NotFound):
                        container.remove(force=True)
