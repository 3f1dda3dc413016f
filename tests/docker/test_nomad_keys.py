"""The docker driver's Nomad 1.x keys, as the container Docker creates shows them."""

from __future__ import annotations

from typing import Any

import pytest
from herder_docker.config import DOCKER_DEFAULT_CAPS, PluginConfig

from .helpers import IMAGE, Docker, DockerJobs, containers_of, docker_job, job_name, sh


def started_container(jobs: DockerJobs, docker_client: Docker, job: dict[str, Any],
                      plugin: dict[str, dict[str, Any]] | None = None) -> tuple[Any, Any, Any]:
    run, wait = jobs.start(job, plugin=plugin)
    run.wait_for("Started")
    [container] = containers_of(docker_client, run.runner.allocs[0].alloc.id)
    return run, wait, container


def test_nomad_1x_keys_reach_the_container(jobs: DockerJobs, docker_client: Docker) -> None:
    config = sh("sleep 300", cap_add=["NET_BIND_SERVICE"], cap_drop=["MKNOD"], extra_hosts=["db.internal:10.0.0.7"],
                init=True, ulimit={"nofile": "1024:2048"}, shm_size=64 * 1024 * 1024,
                mount=[{"type": "tmpfs", "target": "/scratch", "tmpfs_options": {"size": 1024 * 1024}}])
    job = docker_job(job_name("keys"), config, kill_timeout="1s")
    job["job"]["groups"][0]["tasks"][0]["resources"]["memory_max"] = 128
    run, wait, container = started_container(jobs, docker_client, job)
    host = container.attrs["HostConfig"]
    # cap_drop, and net_raw: Docker gives it, Nomad's allow_caps leaves it out
    assert host["CapAdd"] == ["NET_BIND_SERVICE"] and host["CapDrop"] == ["MKNOD", "NET_RAW"]
    assert host["ExtraHosts"] == ["db.internal:10.0.0.7"]
    assert host["Init"] is True
    assert host["Ulimits"] == [{"Name": "nofile", "Soft": 1024, "Hard": 2048}]
    assert host["ShmSize"] == 64 * 1024 * 1024
    assert [m["Target"] for m in host["Mounts"]] == ["/scratch"]
    # memory_max is the hard limit, memory the reservation (Nomad's oversubscription)
    assert (host["Memory"], host["MemoryReservation"]) == (128 * 1024 * 1024, 64 * 1024 * 1024)
    run.runner.stop()
    assert wait() == "stopped"


def test_memory_max_minus_one_lifts_the_hard_limit(jobs: DockerJobs, docker_client: Docker) -> None:
    job = docker_job(job_name("nolimit"), sh("sleep 300"), kill_timeout="1s")
    job["job"]["groups"][0]["tasks"][0]["resources"]["memory_max"] = -1
    run, wait, container = started_container(jobs, docker_client, job)
    host = container.attrs["HostConfig"]
    assert (host["Memory"], host["MemoryReservation"]) == (0, 64 * 1024 * 1024)
    run.runner.stop()
    assert wait() == "stopped"


def test_ports_publishes_only_the_ports_it_names(jobs: DockerJobs, docker_client: Docker) -> None:
    ports = [{"label": "http", "to": 8080}, {"label": "admin", "to": 9090}]
    config = {"image": IMAGE, "command": "sleep", "args": ["300"], "ports": ["http"]}
    run, wait, container = started_container(jobs, docker_client,
                                             docker_job(job_name("ports"), config, ports=ports, kill_timeout="1s"))
    bindings = container.attrs["HostConfig"]["PortBindings"]
    assert set(bindings) == {"8080/tcp", "8080/udp"}
    run.runner.stop()
    wait()


def test_a_port_label_the_network_lacks_fails_the_task(jobs: DockerJobs) -> None:
    run = jobs.run(docker_job(job_name("noport"), sh("true", ports=["db"]), type="batch"))
    assert run.status == "failed"
    failure = next(e.event for e in run.events if e.event.type == "Driver Failure")
    assert "ports: db not a port of the task's network" in failure.message


def test_cap_add_beyond_allow_caps_and_sysctl_are_refused_unless_allowed(jobs: DockerJobs) -> None:
    refused = jobs.run(docker_job(job_name("caps"), sh("true", cap_add=["SYS_ADMIN"]), type="batch"))
    assert "cap_add: SYS_ADMIN not allowed" in next(
        e.event.message for e in refused.events if e.event.type == "Driver Failure")
    sysctl = jobs.run(docker_job(job_name("sysctl"), sh("true", sysctl={"net.core.somaxconn": "512"}), type="batch"))
    assert "allow_sysctl" in next(e.event.message for e in sysctl.events if e.event.type == "Driver Failure")
    allowed = jobs.run(docker_job(job_name("sysctl"), sh("cat /proc/sys/net/core/somaxconn",
                                                          sysctl={"net.core.somaxconn": "512"}), type="batch"),
                       plugin={"docker": {"allow_sysctl": True}})
    assert allowed.status == "complete", allowed.types()


@pytest.mark.parametrize(("allow_caps", "add", "drop", "expected"), [
    (None, [], [], ([], ["NET_RAW"])),
    (None, ["cap_chown"], ["CAP_MKNOD", "mknod"], (["CHOWN"], ["MKNOD", "NET_RAW"])),
    (["chown", "net_raw"], [], [], ([], sorted(cap.upper() for cap in DOCKER_DEFAULT_CAPS
                                                if cap not in ("chown", "net_raw")))),
    (["all"], ["sys_admin"], [], (["SYS_ADMIN"], [])),
    (None, [], ["all"], ([], ["ALL"])),
], ids=["default", "names", "narrow", "all", "drop-all"])
def test_capabilities_are_docker_defaults_less_what_allow_caps_leaves_out(
    allow_caps: list[str] | None, add: list[str], drop: list[str], expected: tuple[list[str], list[str]],
) -> None:
    config = PluginConfig.from_mapping({} if allow_caps is None else {"allow_caps": allow_caps})
    assert config.capabilities(add, drop) == expected


def test_allow_caps_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="allow_caps must be a list"):
        PluginConfig.from_mapping({"allow_caps": "net_raw"})


def test_ignored_keys_are_named_in_a_driver_event(jobs: DockerJobs) -> None:
    config = sh("true", logging={"type": "json-file"}, readonly_rootfs=False, auth_soft_fail=True)
    run = jobs.run(docker_job(job_name("ignored"), config, type="batch"))
    assert run.status == "complete", run.types()
    messages = [e.event.message for e in run.events if e.event.type == "Driver"]
    assert "ignoring config keys herder's docker driver does not implement: logging, readonly_rootfs" in messages
