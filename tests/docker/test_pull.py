"""Pulling images: the real Docker daemon pulls from a registry test double on 127.0.0.1.

Each test serves images of its own, named ``herder-test/pulled-<uuid>:1``:
they are built locally (``unique_image``, or an image with a few MB of random
bytes for progress), added to the registry, and removed from the engine, so
that the only way a task gets them is a pull. The ``registry`` fixture removes
the pulled ``127.0.0.1:PORT/...`` images at the end of each test.

What the daemon (20.10) asks for in one pull of ``name:tag``: ``GET /v2/``,
``HEAD`` of the manifest by tag, ``GET`` of the manifest by digest, then the
config blob and each layer blob it does not have yet, unless the image (its
config) is already there; pulled again, it may skip the GET of a manifest it
keeps. The tests count against a pull measured in the
same test rather than against these numbers.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.waiting import poll, wait_for

from .helpers import (
    Docker,
    DockerJobs,
    docker_job,
    events_of,
    image_exists,
    job_name,
    remove_image,
    sh,
)
from .registry import LAYER_GZIP, MANIFEST_V2, Registry, ServedImage, sha256

PAYLOAD = 4 * 1024 * 1024
"""Random bytes in the image of the progress and shared-pull tests: a layer that takes a while when slow."""
SLOW = 0.03
"""Seconds between two 64 KiB chunks of a slow blob: the payload layer takes about 2 s."""


@pytest.fixture
def jobs(registry: Registry, jobs: DockerJobs) -> DockerJobs:
    """``jobs`` of conftest, set up after ``registry`` so that it is torn down first: the
    jobs' containers are gone when the registry fixture removes the images pulled from it."""
    return jobs


@pytest.fixture
def payload_image(docker_client: Docker, busybox_image: str, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A factory of images FROM the test busybox with ``PAYLOAD`` random bytes in ``/payload``."""
    made: list[str] = []

    def make() -> str:
        tag = f"herder-test/payload-{uuid.uuid4().hex[:12]}:1"
        directory = tmp_path / f"payload-{len(made)}"
        directory.mkdir()
        (directory / "payload").write_bytes(os.urandom(PAYLOAD))
        (directory / "Dockerfile").write_text(f"FROM {busybox_image}\nCOPY payload /payload\n"
                                              f"LABEL herder.test.unique={tag}\n")
        made.append(tag)
        docker_client.images.build(path=str(directory), tag=tag, rm=True, forcerm=True, pull=False)
        return tag

    yield make
    for tag in made:
        remove_image(docker_client, tag)


@pytest.fixture
def serve(registry: Registry, docker_client: Docker) -> Callable[[str], ServedImage]:
    """Serve a local image as ``herder-test/pulled-<uuid>:1`` and remove it from the engine."""

    def serve(local: str) -> ServedImage:
        image = registry.add_image(docker_client, local, f"herder-test/pulled-{uuid.uuid4().hex[:12]}", "1")
        remove_image(docker_client, local)
        assert not image_exists(docker_client, local)
        assert not image_exists(docker_client, image.ref)
        return image

    return serve


def tasks_of(run: Any) -> list[Any]:
    return [alloc.tasks[0] for alloc in run.runner.allocs]


def manifest_fetches(registry: Registry, image: ServedImage) -> tuple[int, int]:
    """Requests of the image's manifest: (by tag, any method; GET by digest)."""
    return registry.manifest_requests(image, None), registry.manifest_requests(image, "GET", by="digest")


def test_the_registry_double_answers_like_a_registry(registry: Registry, docker_client: Docker,
                                                     busybox_image: str) -> None:
    image = registry.add_image(docker_client, busybox_image, f"herder-test/pulled-{uuid.uuid4().hex[:12]}", "1")
    base = f"http://{registry.host}/v2"

    def fetch(path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(f"{base}{path}", method=method)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    status, headers, _ = fetch("/")
    assert status == 200 and headers["Docker-Distribution-API-Version"] == "registry/2.0"
    status, headers, served = fetch(f"/{image.name}/manifests/1")
    assert status == 200 and headers["Content-Type"] == MANIFEST_V2
    assert headers["Docker-Content-Digest"] == sha256(served) == image.manifest_digest
    manifest = json.loads(served)
    assert manifest["config"]["digest"] == image.config_digest == docker_client.images.get(busybox_image).id
    assert [layer["mediaType"] for layer in manifest["layers"]] == [LAYER_GZIP] * len(image.layer_digests)
    status, headers, body = fetch(f"/{image.name}/manifests/{image.manifest_digest}", "HEAD")
    assert status == 200 and body == b"" and headers["Content-Length"] == str(len(served))
    for layer in manifest["layers"]:
        status, headers, body = fetch(f"/{image.name}/blobs/{layer['digest']}")
        assert status == 200 and sha256(body) == layer["digest"] and len(body) == layer["size"]
    status, _, body = fetch(f"/{image.name}/manifests/2")
    assert status == 404 and json.loads(body)["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    status, _, body = fetch(f"/{image.name}/blobs/sha256:{'0' * 64}")
    assert status == 404 and json.loads(body)["errors"][0]["code"] == "BLOB_UNKNOWN"
    assert registry.manifest_requests(image) == 1


def test_a_task_runs_from_an_image_only_in_the_registry(registry: Registry, jobs: DockerJobs,
                                                        docker_client: Docker, unique_image: Callable[[], str],
                                                        serve: Callable[[str], ServedImage]) -> None:
    image = serve(unique_image())
    run = jobs.run(docker_job(job_name("pull"), sh("echo pulled > /local/ran", image=image.ref), type="batch"))
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]
    assert (tasks_of(run)[0].ctx.task_dir.local_dir / "ran").read_text() == "pulled\n"
    driver = events_of(run, "Driver")
    assert driver and driver[0].message == f"Downloading image {image.ref}", [e.message for e in driver]
    assert driver[0].details["image"] == image.ref
    by_tag, by_digest = manifest_fetches(registry, image)
    assert by_tag >= 1 and by_digest == 1, registry.all_requests()
    assert registry.blob_requests(image, image.config_digest) == 1
    assert image_exists(docker_client, image.ref)


def test_a_pull_reports_its_progress(registry: Registry, jobs: DockerJobs, payload_image: Callable[[], str],
                                     serve: Callable[[str], ServedImage]) -> None:
    image = serve(payload_image())
    registry.slow = SLOW
    run = jobs.run(docker_job(job_name("progress"), sh("true", image=image.ref), type="batch"))
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]
    progress = [e.details["progress"] for e in events_of(run, "Driver") if e.details.get("progress")]
    assert progress, [e.message for e in events_of(run, "Driver")]
    for detail in progress:
        assert 0 < detail["current"] <= detail["total"], progress
    # the payload layer (random bytes: gzip does not shrink it) is in the totals once the daemon reports it
    assert max(detail["total"] for detail in progress) >= PAYLOAD, progress


def test_concurrent_pulls_of_one_image_share_a_single_pull(registry: Registry, jobs: DockerJobs,
                                                           payload_image: Callable[[], str],
                                                           unique_image: Callable[[], str],
                                                           serve: Callable[[str], ServedImage]) -> None:
    registry.slow = SLOW
    # what one pull asks of the registry, measured on another image pulled by one task
    once = serve(unique_image())
    run = jobs.run(docker_job(job_name("once"), sh("true", image=once.ref), type="batch"))
    assert run.status == "complete", run.types()
    baseline = manifest_fetches(registry, once)
    assert baseline[0] >= 1 and baseline[1] >= 1, registry.all_requests()

    shared = serve(payload_image())
    run = jobs.run(docker_job(job_name("shared"), sh("true", image=shared.ref), type="batch", count=3))
    assert run.status == "complete", run.types()
    # all three tasks were there while the image was downloading (else the test shows nothing)
    for task in tasks_of(run):
        assert any(e.type == "Driver" and e.details.get("image") == shared.ref for e in task.status.events), \
            f"{task.name} of {task.ctx.alloc_id} did not wait for the pull: {[e.type for e in task.status.events]}"
    # ... and the daemon was asked for the image once: one pull's manifest fetches, each blob at most once
    # (a layer the daemon has from an earlier pull of another image is not fetched at all)
    assert manifest_fetches(registry, shared) == baseline, registry.all_requests()
    counts = {digest: registry.blob_requests(shared, digest) for digest in shared.blobs}
    assert counts[shared.config_digest] == 1, counts
    assert counts[shared.layer_digests[-1]] == 1, counts  # the payload: no one has it
    assert all(count <= 1 for count in counts.values()), counts


def test_force_pull_pulls_an_image_that_is_present(registry: Registry, jobs: DockerJobs, docker_client: Docker,
                                                   unique_image: Callable[[], str],
                                                   serve: Callable[[str], ServedImage]) -> None:
    image = serve(unique_image())
    repository, _, tag = image.ref.rpartition(":")
    docker_client.images.pull(repository, tag=tag)
    one_pull = manifest_fetches(registry, image)
    assert one_pull[0] >= 1, registry.all_requests()

    run = jobs.run(docker_job(job_name("present"), sh("true", image=image.ref), type="batch"))
    assert run.status == "complete", run.types()
    assert events_of(run, "Driver") == []
    assert manifest_fetches(registry, image) == one_pull, "the image is present: no pull without force_pull"

    run = jobs.run(docker_job(job_name("force"), sh("true", image=image.ref, force_pull=True), type="batch"))
    assert run.status == "complete", run.types()
    assert [e.message for e in events_of(run, "Driver")][:1] == [f"Downloading image {image.ref}"]
    # the daemon asks for the manifest by tag again (the manifest itself it may keep from the first pull)
    assert registry.manifest_requests(image, None) == 2 * one_pull[0], registry.all_requests()


def test_a_tag_the_registry_does_not_have_fails_fast(registry: Registry, jobs: DockerJobs,
                                                     unique_image: Callable[[], str],
                                                     serve: Callable[[str], ServedImage]) -> None:
    image = serve(unique_image())
    missing = f"{registry.host}/{image.name}:2"
    # restarts allowed: only an unrecoverable error stops at once (no Restarting event, below)
    run = jobs.run(docker_job(job_name("missing"), sh("true", image=missing), type="batch", attempts=3),
                   timeout=30)
    assert run.status == "failed"
    failures = events_of(run, "Driver Failure")
    assert len(failures) == 1, run.types("t")
    assert missing in failures[0].message and "manifest unknown" in failures[0].message, failures[0].message
    assert failures[0].details["recoverable"] is False
    assert run.types("t")[-1] == "Not Restarting"
    assert events_of(run, "Not Restarting")[0].message == "Error was unrecoverable"
    assert "Restarting" not in run.types("t")
    assert registry.requests(f"/v2/{image.name}/manifests/2") >= 1


def test_cleanup_image_removes_a_pulled_image_once_the_task_is_done(registry: Registry, jobs: DockerJobs,
                                                                   docker_client: Docker,
                                                                   unique_image: Callable[[], str],
                                                                   serve: Callable[[str], ServedImage]) -> None:
    image = serve(unique_image())
    run = jobs.run(docker_job(job_name("cleanup"), sh("true", image=image.ref), type="batch"),
                   plugin={"docker": {"cleanup_image": True, "cleanup_image_delay": "0s"}})
    assert run.status == "complete", run.types()
    assert events_of(run, "Driver"), "the image was not pulled"
    wait_for(lambda: not image_exists(docker_client, image.ref), what=f"{image.ref} removed")


def test_cleanup_image_keeps_a_pulled_image_for_the_default_delay(registry: Registry, jobs: DockerJobs,
                                                                  docker_client: Docker,
                                                                  unique_image: Callable[[], str],
                                                                  serve: Callable[[str], ServedImage]) -> None:
    image = serve(unique_image())
    run = jobs.run(docker_job(job_name("keep"), sh("true", image=image.ref), type="batch"),
                   plugin={"docker": {"cleanup_image": True}})
    assert run.status == "complete", run.types()
    assert events_of(run, "Driver"), "the image was not pulled"
    assert not poll(lambda: not image_exists(docker_client, image.ref), timeout=2), \
        "removed although cleanup_image_delay (3m by default) has not passed"


@pytest.fixture
def private_registry(docker_client: Docker) -> Iterator[Registry]:
    """A registry test double that wants credentials (user ``herder``, password ``s3cret``)."""
    registry = Registry(credentials=("herder", "s3cret")).start()
    try:
        yield registry
    finally:
        registry.stop()
        for image in registry.served:
            remove_image(docker_client, image.ref)


def test_auth_gives_the_pull_its_credentials(private_registry: Registry, jobs: DockerJobs, docker_client: Docker,
                                             unique_image: Callable[[], str]) -> None:
    local = unique_image()
    image = private_registry.add_image(docker_client, local, f"herder-test/private-{uuid.uuid4().hex[:12]}", "1")
    remove_image(docker_client, local)

    refused = jobs.run(docker_job(job_name("noauth"), sh("true", image=image.ref), type="batch", attempts=2))
    assert refused.status == "failed"
    [failure] = events_of(refused, "Driver Failure")  # refused credentials are final: no retry
    assert "no basic auth credentials" in failure.message or "unauthorized" in failure.message.lower()

    auth = {"username": "herder", "password": "s3cret"}
    run = jobs.run(docker_job(job_name("auth"), sh("echo in > /local/ran", image=image.ref, auth=auth), type="batch"))
    assert run.status == "complete", [(r.event.type, r.event.message) for r in run.events]
    assert (tasks_of(run)[0].ctx.task_dir.local_dir / "ran").read_text() == "in\n"


def test_auth_soft_fail_tries_again_without_the_refused_credentials(private_registry: Registry, jobs: DockerJobs,
                                                                  docker_client: Docker,
                                                                  unique_image: Callable[[], str]) -> None:
    """Nomad's auth_soft_fail: credentials the registry refuses are dropped and the pull tried again
    without them (for a public image). This registry wants credentials, so the second try fails too."""
    local = unique_image()
    image = private_registry.add_image(docker_client, local, f"herder-test/private-{uuid.uuid4().hex[:12]}", "1")
    remove_image(docker_client, local)
    wrong = {"username": "herder", "password": "wrong"}
    strict = jobs.run(docker_job(job_name("strict"), sh("true", image=image.ref, auth=wrong), type="batch"))
    soft = jobs.run(docker_job(job_name("soft"), sh("true", image=image.ref, auth=wrong, auth_soft_fail=True),
                               type="batch"))
    assert strict.status == soft.status == "failed"
    retries = [e.message for e in events_of(soft, "Driver") if "without the refused credentials" in e.message]
    assert len(retries) == 1, [e.message for e in events_of(soft, "Driver")]
    assert not [e for e in events_of(strict, "Driver") if "without the refused credentials" in e.message]
