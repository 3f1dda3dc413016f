"""The allocation's network in bridge mode: the pause container that owns it, on the real Docker engine.

The hooks are called as herder's client calls them (``bridge.py``); the
namespace keeps only its loopback here (herder's CNI wiring has its own
tests): what is tested is that the pause container owns the namespace, that
the task containers join it, and that nothing of it outlives the allocation.
"""

from __future__ import annotations

import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from herder_docker.config import PluginConfig

from herder import AllocatedPort, DriverError, DriverNetwork, NetworkDNS, NetworkIsolation
from herder.plugins.hooks import Hooks
from tests.support.waiting import wait_for, wait_for_text

from .bridge import DRIVER, BridgeAlloc, load_driver
from .helpers import Docker, container_ids, image_exists
from .registry import Registry

SANDBOX_ID = "docker_sandbox_container_id"
INSIDE_PORT = 8080
"""A port inside the allocation's namespace: nothing on the host binds it."""

SLEEP = ["sleep", "3600"]


@pytest.fixture
def bridge(docker_client: Docker, docker_driver: str, busybox_image: str, pause_image: str,
           tmp_path: Path) -> Iterator[Callable[..., BridgeAlloc]]:
    """A factory of allocations in bridge mode (with a driver of their own, or ``hooks``'s);
    each one's containers and pause container are removed at the end."""
    made: list[BridgeAlloc] = []

    def make(hooks: Hooks | None = None) -> BridgeAlloc:
        alloc = BridgeAlloc(docker_client, hooks or load_driver(pause_image), tmp_path / f"alloc-{len(made)}")
        made.append(alloc)
        return alloc

    yield make
    for alloc in made:
        alloc.close()


def test_the_driver_says_its_tasks_can_join_the_allocations_network(docker_driver: str, pause_image: str) -> None:
    assert load_driver(pause_image).capabilities(DRIVER).network_isolation == {"host", "group"}


def test_the_task_container_runs_in_the_pause_containers_namespace(bridge: Callable[..., BridgeAlloc],
                                                                  docker_client: Docker, busybox_image: str) -> None:
    alloc = bridge()
    dns = NetworkDNS(servers=("192.0.2.53",), searches=("example.org",), options=("ndots:2",))
    isolation = alloc.create(hostname="web-1", dns=dns, ip="172.26.64.9")
    pause = docker_client.api.inspect_container(isolation.labels[SANDBOX_ID])
    assert pause["HostConfig"]["NetworkMode"] == "none"
    assert pause["Config"]["Labels"]["herder.alloc_id"] == alloc.alloc.id
    assert isolation.path == Path(f"/proc/{pause['State']['Pid']}/ns/net")
    assert isolation.labels == {SANDBOX_ID: pause["Id"]}

    # The host port is CNI's portmap's to map (herder's client); the container publishes none.
    ports = [AllocatedPort(label="http", value=9001, to=INSIDE_PORT), AllocatedPort(label="admin", value=9002)]
    task, ctx, handle = alloc.start("web", {"image": busybox_image, "command": SLEEP[0], "args": SLEEP[1:]}, ports)
    namespace = os.stat(isolation.path).st_ino
    assert os.stat(f"/proc/{alloc.pid(handle)}/ns/net").st_ino == namespace
    assert namespace != os.stat("/proc/self/ns/net").st_ino
    container = docker_client.api.inspect_container(handle.id)
    assert container["HostConfig"]["NetworkMode"] == f"container:{pause['Id']}"
    assert not container["HostConfig"]["PortBindings"]

    # The container shares the pause container's hostname and resolv.conf: the group's.
    result = alloc.hooks.task_exec(task, ctx, handle, ["sh", "-c", "hostname; cat /etc/resolv.conf"], 10)
    assert result.exit_code == 0, result.output
    hostname, *resolv = result.output.decode().splitlines()
    assert hostname == "web-1"
    assert {"nameserver 192.0.2.53", "search example.org", "options ndots:2"} <= set(resolv)

    assert handle.network == DriverNetwork(ip="172.26.64.9", port_map={"http": INSIDE_PORT, "admin": 9002},
                                           auto_advertise=False)


def test_two_containers_of_an_allocation_reach_each_other_on_localhost(bridge: Callable[..., BridgeAlloc],
                                                                       busybox_image: str) -> None:
    alloc = bridge()
    alloc.create()
    serve = f"echo hello-from-api > /local/index.html && exec httpd -f -p 127.0.0.1:{INSIDE_PORT} -h /local"
    alloc.start("api", {"image": busybox_image, "command": "sh", "args": ["-c", serve]})
    # The server may not listen yet when the client starts: it tries again, as a dashboard would.
    fetch = (f"for i in $(seq 100); do wget -q -O- http://127.0.0.1:{INSIDE_PORT}/index.html && exit 0; "
             "sleep 0.2; done; exit 1")
    _, ctx, handle = alloc.start("dashboard", {"image": busybox_image, "command": "sh", "args": ["-c", fetch]})
    result = handle.wait(60)
    assert result is not None and result.exit_code == 0, result
    assert wait_for_text(ctx.task_dir.dir / "stdout") == "hello-from-api"


def test_destroy_removes_the_pause_container_and_can_be_repeated(bridge: Callable[..., BridgeAlloc],
                                                                  docker_client: Docker) -> None:
    alloc = bridge()
    isolation = alloc.create()
    assert container_ids(docker_client, alloc.alloc.id) == [isolation.labels[SANDBOX_ID]]
    alloc.hooks.alloc_network_destroy(DRIVER, alloc.alloc, isolation)
    assert container_ids(docker_client, alloc.alloc.id) == []
    alloc.hooks.alloc_network_destroy(DRIVER, alloc.alloc, isolation)  # gone already: nothing to do


def test_destroy_finds_the_pause_container_by_its_label(bridge: Callable[..., BridgeAlloc], docker_client: Docker,
                                                        pause_image: str) -> None:
    """A herder killed before it kept the pause container's id still knows the allocation was in bridge mode."""
    alloc = bridge()
    alloc.create()
    load_driver(pause_image).alloc_network_destroy(DRIVER, alloc.alloc, NetworkIsolation(path=Path()))
    assert container_ids(docker_client, alloc.alloc.id) == []


def test_a_restarted_driver_gets_the_running_pause_container_back(bridge: Callable[..., BridgeAlloc],
                                                                  docker_client: Docker, pause_image: str) -> None:
    alloc = bridge()
    first = alloc.create(hostname="h")
    assert load_driver(pause_image).alloc_network_create(alloc.alloc, "h", None) == (DRIVER, first)

    # One that no longer runs is a namespace that lost its interfaces: it is replaced.
    docker_client.api.stop(first.labels[SANDBOX_ID], timeout=0)
    _, replaced = load_driver(pause_image).alloc_network_create(alloc.alloc, "h", None)
    alloc.isolation = replaced
    assert replaced.labels[SANDBOX_ID] != first.labels[SANDBOX_ID]
    assert container_ids(docker_client, alloc.alloc.id) == [replaced.labels[SANDBOX_ID]]


def test_pause_containers_of_allocations_that_are_gone_are_removed_when_the_driver_starts(
        bridge: Callable[..., BridgeAlloc], docker_client: Docker, pause_image: str) -> None:
    gone, kept = bridge(), bridge()
    gone.create()
    kept.create()
    shutil.rmtree(gone.alloc.dir)  # collected while no herder ran

    restarted = load_driver(pause_image)
    assert restarted.fingerprint(DRIVER).healthy  # the driver reaches the daemon: it sweeps
    wait_for(lambda: not container_ids(docker_client, gone.alloc.id), what="the stale pause container removed")
    for thread in threading.enumerate():
        if thread.name == "docker-pause-sweep":
            thread.join(30)
    assert len(container_ids(docker_client, kept.alloc.id)) == 1


@pytest.mark.parametrize(("key", "value"), [("network_mode", "host"), ("hostname", "web"),
                                            ("dns_servers", ["192.0.2.53"]), ("extra_hosts", ["db:192.0.2.1"])])
def test_what_a_joining_container_cannot_have_of_its_own_is_refused_naming_it(
        bridge: Callable[..., BridgeAlloc], docker_client: Docker, busybox_image: str, key: str,
        value: object) -> None:
    alloc = bridge()
    alloc.create()
    with pytest.raises(DriverError, match=f'config.{key} conflicts with the group network mode "bridge"'):
        alloc.start("t", {"image": busybox_image, key: value})
    assert len(container_ids(docker_client, alloc.alloc.id)) == 1  # the pause container alone


def test_the_infra_image_is_pulled_when_absent(registry: Registry, bridge: Callable[..., BridgeAlloc],
                                               docker_client: Docker, pause_image: str) -> None:
    served = registry.add_image(docker_client, pause_image, f"herder-test/pause-{uuid.uuid4().hex[:12]}", "1")
    assert not image_exists(docker_client, served.ref)
    alloc = bridge(load_driver(pause_image, infra_image=served.ref))
    isolation = alloc.create()
    assert registry.manifest_requests(served, None) >= 1
    assert docker_client.api.inspect_container(isolation.labels[SANDBOX_ID])["Config"]["Image"] == served.ref


def test_the_infra_image_settings_default_to_nomads() -> None:
    default = PluginConfig.from_mapping({})
    assert (default.infra_image, default.infra_image_pull_timeout) == ("gcr.io/google_containers/pause-amd64:3.1", 300)
    chosen = PluginConfig.from_mapping({"infra_image": "pause", "infra_image_pull_timeout": "30s"})
    assert (chosen.infra_image, chosen.infra_image_pull_timeout) == ("pause:latest", 30)
    with pytest.raises(ValueError, match="infra_image must be an image name"):
        PluginConfig.from_mapping({"infra_image": " "})
