"""Fixtures for the docker driver's tests, against the real Docker engine.

Nothing is pulled from the internet: the test image ``herder-test/busybox:1``
is built FROM scratch out of the host's static ``/bin/busybox``, and the pull
tests pull from ``registry``, a test double of a registry on 127.0.0.1 that
serves images exported from the local engine (``registry.py``). Tests run in parallel
(pytest-xdist), so every job has a unique name, ports come from
``make_config`` (2000-12000), and every container a test's allocations made
is removed when the test ends, whatever happened.

Without a daemon (or the SDK, or the driver) the tests are skipped, unless
HERDER_REQUIRE names ``docker``: then they fail.
"""

from __future__ import annotations

import fcntl
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.require import require, require_driver

from .helpers import (
    BUSYBOX,
    IMAGE,
    PAUSE_IMAGE,
    Docker,
    DockerJobs,
    build_image,
    busybox_digest,
    docker,
    remove_image,
)
from .registry import Registry

BUILD_TIMEOUT = 300


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Docker]:
    """A client of the daemon at DOCKER_HOST (or the default socket) that answered a ping within 5 s."""
    require("docker", docker is not None, "the Docker SDK for Python (docker) is not installed")
    try:
        probe = docker.from_env(timeout=5)
        probe.ping()
        probe.close()
    except Exception as exc:
        require("docker", False, f"no Docker daemon: {exc}")
    client = docker.from_env(timeout=BUILD_TIMEOUT)
    yield client
    client.close()


@pytest.fixture(scope="session")
def docker_driver(docker_client: Docker) -> str:
    """The herder-docker distribution is installed, loads, and its fingerprint is healthy."""
    require_driver("docker")
    return "docker"


@pytest.fixture(scope="session")
def busybox_image(docker_client: Docker, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``herder-test/busybox:1``, built unless an image of this very busybox is already there."""
    return _build_once(docker_client, tmp_path_factory, IMAGE)


@pytest.fixture(scope="session")
def pause_image(docker_client: Docker, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``herder-test/pause:1``: the busybox image whose command sleeps forever, an ``infra_image``
    for the pause containers (there is no registry to pull Nomad's default from)."""
    return _build_once(docker_client, tmp_path_factory, PAUSE_IMAGE, 'CMD ["/bin/sleep", "2147483647"]\n')


def _build_once(client: Docker, tmp_path_factory: pytest.TempPathFactory, tag: str, extra: str = "") -> str:
    """Build ``tag`` (see ``build_image``) unless an image of this very busybox is already there.

    xdist workers take turns (a file lock in the temporary directory they
    share), so the image is built once; a build by another program at the
    same time is harmless: the tag moves from one identical image to the other.
    """
    require("docker", BUSYBOX.exists(), f"{BUSYBOX} is missing (Debian package busybox-static)")
    shared = tmp_path_factory.getbasetemp().parent
    with (shared / f"{tag.replace('/', '-')}-image.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            labels = client.images.get(tag).labels or {}
            if labels.get("herder.test.busybox.sha256") == busybox_digest():
                return tag
        except docker.errors.ImageNotFound:
            pass
        build_image(client, tag, tmp_path_factory.mktemp("image"), extra)
    return tag


@pytest.fixture
def unique_image(docker_client: Docker, busybox_image: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A factory of images with a tag and an id of their own: ``herder-test/busybox-<uuid>:1``.

    For tests that watch an image being removed; what is left is removed at the end.
    """
    made: list[str] = []

    def make() -> str:
        tag = f"herder-test/busybox-{uuid.uuid4().hex[:12]}:1"
        directory = tmp_path / f"image-{len(made)}"
        directory.mkdir()
        made.append(tag)
        build_image(docker_client, tag, directory, f"LABEL herder.test.unique={tag}\n")
        return tag

    yield make
    for tag in made:
        remove_image(docker_client, tag)


@pytest.fixture
def jobs(docker_client: Docker, docker_driver: str, busybox_image: str, data_dir: Path) -> Iterator[DockerJobs]:
    """Runs jobs through herder's in-process runner with the docker driver; cleans up after the test."""
    jobs = DockerJobs(docker_client, data_dir)
    yield jobs
    jobs.close()


@pytest.fixture
def registry(docker_client: Docker) -> Iterator[Registry]:
    """A registry test double on ``127.0.0.1:PORT`` (see ``registry.py``), empty until ``add_image``.

    At the end it stops, and every image it served is removed from the engine
    under its ``127.0.0.1:PORT/...`` name, pulled or not, whatever happened.
    A test that also runs jobs must have them cleaned up first (so that no
    container still uses the image): ask for ``registry`` before ``jobs``.
    """
    registry = Registry().start()
    try:
        yield registry
    finally:
        registry.stop()
        for image in registry.served:
            remove_image(docker_client, image.ref)
