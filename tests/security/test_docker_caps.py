"""A container must not read the host's traffic: no ``NET_RAW``, and the host's network only where allowed.

The attack: a container on the host's network (``network_mode = "host"``)
opens a packet socket on the host's loopback and reads what the operator's
command line sends another agent there, ``Authorization: Bearer ...``
included. Docker's default capabilities include ``NET_RAW``, which packet
and raw sockets need; Nomad (≥ 1.1) drops it, and so must herder: a
container gets Docker's defaults less what ``[plugin.docker] allow_caps``
leaves out. The host's network, and another container's, are refused
unless the plugin allows them.

busybox's ``arping`` opens a packet socket before anything else: without
``NET_RAW`` it says ``socket: Operation not permitted``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.docker.conftest import busybox_image, docker_client, docker_driver, jobs  # noqa: F401 (fixtures)
from tests.docker.helpers import IMAGE, DockerJobs, docker_job, events_of, job_name
from tests.support.running import Run

NET_RAW = 13
"""``CAP_NET_RAW``'s bit in ``/proc/<pid>/status``."""
REFUSED = "arping: socket: Operation not permitted"

# The capability sets the container's root has, then a packet socket on ``$1`` (an address no one answers).
ATTACK = ("grep -E '^Cap(Eff|Bnd)' /proc/self/status; "
          "arping -c 1 -w 1 -I \"$1\" 192.0.2.1 2>&1; echo done")


def attack(interface: str, **config: Any) -> dict[str, Any]:
    return {"image": IMAGE, "command": "sh", "args": ["-c", ATTACK, "attack", interface], **config}


def output(run: Run) -> str:
    logs = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir
    return (logs / "t.stdout.0").read_text()


def capabilities(text: str) -> dict[str, int]:
    """``CapEff`` and ``CapBnd`` of the attack's output, as numbers."""
    return {line.split(":")[0]: int(line.split()[1], 16) for line in text.splitlines() if line.startswith("Cap")}


@pytest.mark.parametrize(("plugin", "has_net_raw"), [
    ({}, False),
    ({"allow_caps": ["audit_write", "chown", "dac_override", "fowner", "fsetid", "kill", "mknod",
                     "net_bind_service", "setfcap", "setgid", "setpcap", "setuid", "sys_chroot", "NET_RAW"]}, True),
], ids=["default", "allow-caps-net-raw"])
def test_a_container_has_net_raw_only_where_allow_caps_gives_it(
    jobs: DockerJobs, plugin: dict[str, Any], has_net_raw: bool,  # noqa: F811
) -> None:
    run = jobs.run(docker_job(job_name("net-raw"), attack("eth0"), type="batch"), plugin={"docker": plugin})
    assert run.status == "complete", run.types()
    text = output(run)
    caps = capabilities(text)
    assert set(caps) == {"CapEff", "CapBnd"}, text
    assert all(bool(value >> NET_RAW & 1) is has_net_raw for value in caps.values()), text
    assert (REFUSED not in text) is has_net_raw, text
    assert caps["CapEff"] != 0, text  # root in the container keeps the rest of Docker's defaults


@pytest.mark.parametrize("mode", ["host", "container:herder-some-other-allocation"])
def test_the_host_network_and_another_containers_are_refused_unless_allowed(
    jobs: DockerJobs, mode: str,  # noqa: F811
) -> None:
    run = jobs.run(docker_job(job_name("netns"), attack("lo", network_mode=mode), type="batch"))
    assert run.status == "failed", run.types()
    [failure] = events_of(run, "Driver Failure")
    setting = "allow_host_network" if mode == "host" else "allow_container_network"
    assert f'config.network_mode = "{mode}" is not allowed' in failure.message
    assert f"set [plugin.docker] {setting} = true" in failure.message
    assert not events_of(run, "Started")


def test_on_the_host_network_where_allowed_a_container_still_cannot_sniff(jobs: DockerJobs) -> None:  # noqa: F811
    run = jobs.run(docker_job(job_name("sniff"), attack("lo", network_mode="host"), type="batch"),
                   plugin={"docker": {"allow_host_network": True}})
    assert run.status == "complete", run.types()
    text = output(run)
    assert REFUSED in text, text
    assert not capabilities(text)["CapEff"] >> NET_RAW & 1, text
