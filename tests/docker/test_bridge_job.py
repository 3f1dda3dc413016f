"""A bridge-mode job with a docker task and a raw_exec task, end to end: herder's client makes the
allocation's namespace through the docker driver's pause container, the CNI plugins attach it, and
both tasks run in it. Needs root and the standard CNI plugins besides Docker."""

from __future__ import annotations

import json
import re
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.consul import free_ports
from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.network import leftovers, remove_leftovers, require_networking
from tests.support.waiting import wait_for

from .helpers import Docker, DockerJobs, container_ids, containers_of, job_name

FETCH = """\
import signal, sys, time, urllib.request
while True:  # until the sibling listens, however long a loaded machine takes to start it
    try:
        body = urllib.request.urlopen(sys.argv[1], timeout=2).read().decode()
    except OSError:
        time.sleep(0.2)  # a retry interval, not a wait for the sibling
        continue
    print("sibling said", body.strip(), flush=True)
    break
signal.pause()
"""
"""The raw_exec task: fetch the docker task's page on 127.0.0.1, say what it got, and stay up."""


@pytest.fixture
def bridge_jobs(jobs: DockerJobs) -> Iterator[DockerJobs]:
    """``jobs``, where the CNI plugins are; after the test, no allocation left a network behind."""
    require_networking()
    yield jobs
    jobs.close()  # every run stopped first (again at the end of ``jobs``: nothing left to do then)
    assert_nothing_left(jobs.client, [alloc.alloc.id for run, _ in jobs.runs for alloc in run.runner.allocs])


def assert_nothing_left(client: Docker, alloc_ids: list[str]) -> None:
    """No container, namespace, iptables rule or lease of these allocations; what is left is removed."""
    found = {}
    for alloc_id in alloc_ids:
        left = leftovers(alloc_id) + [f"container {cid}" for cid in container_ids(client, alloc_id)]
        if left:
            found[alloc_id] = left
            remove_leftovers(alloc_id)
            for container in containers_of(client, alloc_id):
                container.remove(force=True)
    assert not found, f"left behind: {found}"

PORT_LINE = re.compile(r"\.g\[0\]: port http is ([\d.]+):(\d+)")
"""What ``herder run`` says of the allocation's port on its stderr."""


def refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def bridge_job(inside: int, busybox_image: str) -> dict[str, object]:
    serve = "echo hello-from-docker > /local/index.html && exec httpd -f -p ${NOMAD_PORT_http} -h /local"
    return {"job": {
        "name": job_name("bridge"), "type": "service",
        "groups": [{
            "name": "g",
            "restart": {"attempts": 0, "interval": "1m", "delay": "0s", "mode": "fail"},
            "network": {"mode": "bridge", "hostname": "api-box", "dns": {"servers": ["192.0.2.53"]},
                        "ports": [{"label": "http", "to": inside}]},
            "tasks": [
                {"name": "api", "driver": "docker", "resources": {"cpu": 100, "memory": 64},
                 "config": {"image": busybox_image, "command": "sh", "args": ["-c", serve]}},
                {"name": "probe", "driver": "raw_exec", "resources": {"cpu": 100, "memory": 64},
                 "config": {"command": sys.executable,
                            "args": ["-c", FETCH, "http://127.0.0.1:${NOMAD_PORT_http}/index.html"]}},
            ],
        }],
    }}


def test_a_docker_task_and_a_raw_exec_task_share_the_allocations_network(
        bridge_jobs: DockerJobs, docker_client: Docker, busybox_image: str, pause_image: str) -> None:
    [inside] = free_ports(1)
    run, wait = bridge_jobs.start(bridge_job(inside, busybox_image), plugin={"docker": {"infra_image": pause_image}})
    run.wait_for("Started", "api")
    run.wait_for("Started", "probe")
    [alloc] = run.runner.allocs
    alloc_id = alloc.alloc.id

    # The raw_exec task reached the docker task on 127.0.0.1 of their namespace.
    log = alloc.alloc.dir / "alloc" / "logs" / "probe.stdout.0"
    assert wait_for(lambda: log.exists() and log.read_text(), what=f"{log} written") == \
        "sibling said hello-from-docker\n"

    # The host port reaches the docker task's port inside through CNI's portmap; the port inside is not the host's.
    [port] = [port for port in alloc.placed.all_ports if port.label == "http"]
    assert port.value != inside
    assert read_url(f"http://{port.host_ip}:{port.value}/index.html") == b"hello-from-docker\n"
    assert refused(inside)

    # The docker task runs in the pause container's network, with the group's hostname and dns.
    pause, api = sorted(containers_of(docker_client, alloc_id), key=lambda c: "herder.pause" not in c.labels)
    assert pause.name == f"herder_init_{alloc_id}"
    assert api.attrs["HostConfig"]["NetworkMode"] == f"container:{pause.id}"
    assert api.exec_run(["hostname"]).output.decode().strip() == "api-box"
    assert "nameserver 192.0.2.53" in api.exec_run(["cat", "/etc/resolv.conf"]).output.decode()
    assert leftovers(alloc_id), "the allocation's rules and lease are there while it runs"

    run.runner.stop()
    wait(60)
    assert container_ids(docker_client, alloc_id) == []  # the task container and the pause container
    assert leftovers(alloc_id) == []


@pytest.fixture
def job_file(docker_client: Docker, docker_driver: str, busybox_image: str, pause_image: str, tmp_path: Path,
             config_file: Path) -> Iterator[tuple[Path, int]]:
    """The bridge job in a file, and its port inside, for ``herder run`` on ``config_file`` (its data dir
    ``tmp_path/data``) with the test pause image; after the test nothing of its allocations is left."""
    require_networking()
    [inside] = free_ports(1)
    with config_file.open("a") as config:
        config.write(f'[plugin.docker]\ninfra_image = "{pause_image}"\n')
    job = tmp_path / "bridge.json"
    job.write_text(json.dumps(bridge_job(inside, busybox_image)))
    yield job, inside
    allocs = tmp_path / "data" / "allocs"
    assert_nothing_left(docker_client, [path.name for path in allocs.iterdir()] if allocs.exists() else [])


def test_a_killed_herder_leaves_no_pause_container_once_started_again(
        job_file: tuple[Path, int], docker_client: Docker, config_file: Path, tmp_path: Path) -> None:
    job, _ = job_file
    data_dir = tmp_path / "data"
    first = HerderRun(job, data_dir, config=config_file)
    try:
        first.wait_for("Started", count=2, timeout=120)
        [orphan] = [path.name for path in (data_dir / "allocs").iterdir()]
        first.kill()
        assert len(container_ids(docker_client, orphan)) == 2, "the killed herder removed its containers"
        second = HerderRun(job, data_dir, config=config_file)
        try:
            second.wait_for("Started", count=2, timeout=120)  # the job anew, beside the orphan it reaped
            wait_for(lambda: not container_ids(docker_client, orphan) and not leftovers(orphan),
                     what=lambda: f"the orphan's containers and network removed; left: "
                                  f"{container_ids(docker_client, orphan)} {leftovers(orphan)}")
        finally:
            assert second.interrupt() == 0, second.stderr
    finally:
        first.finish(kill=True)


def test_a_reattached_allocation_keeps_its_pause_container(
        job_file: tuple[Path, int], docker_client: Docker, config_file: Path, tmp_path: Path) -> None:
    job, _ = job_file
    data_dir = tmp_path / "data"
    first = HerderRun(job, data_dir, "--keep", config=config_file)
    try:
        first.wait_for("Started", count=2, timeout=120)
        [alloc_id] = [path.name for path in (data_dir / "allocs").iterdir()]
        before = sorted(container_ids(docker_client, alloc_id))
        address, port = wait_for(lambda: PORT_LINE.search(first.stderr), what="the port line").group(1, 2)
        first.kill()
        second = HerderRun(job, data_dir, "--keep", config=config_file)
        try:
            second.wait_for("Reattached", count=2, timeout=120)
            assert second.of("Started") == []
            assert sorted(container_ids(docker_client, alloc_id)) == before
            # The namespace, its interfaces and its port mapping came through with the pause container.
            assert read_url(f"http://{address}:{port}/index.html") == b"hello-from-docker\n"
        finally:
            assert second.interrupt() == 0, second.stderr
    finally:
        first.finish(kill=True)
