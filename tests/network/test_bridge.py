"""``network { mode = "bridge" }`` with raw_exec tasks: one namespace per allocation, made by the real
CNI plugins, its mapped ports reachable from the host, and nothing of it left once it is over."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path

from tests.network.programs import write_programs
from tests.support.consul import free_ports
from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.network import host_veth, leftovers
from tests.support.waiting import wait_for

JOB = """
job "net" {{
  group "g" {{
    network {{
      mode = "{mode}"
      port "http" {{ to = {inside} }}
    }}
    task "server" {{
      driver = "raw_exec"
      config {{
        command = "{python}"
        args    = ["{server}"]
      }}
    }}
    task "client" {{
      driver = "raw_exec"
      config {{
        command = "{python}"
        args    = ["{client}"]
      }}
    }}
  }}
}}
"""

PORT_LINE = re.compile(r"net\.g\[0\]: port http is ([\d.]+):(\d+)")


def write_job(tmp_path: Path, inside: int, mode: str = "bridge") -> Path:
    server, client = write_programs(tmp_path)
    job = tmp_path / "net.hcl"
    job.write_text(JOB.format(mode=mode, inside=inside, python=sys.executable, server=server, client=client))
    return job


def alloc_ids(data_dir: Path) -> list[str]:
    return sorted(path.name for path in (data_dir / "allocs").iterdir()) if (data_dir / "allocs").exists() else []


def host_port(run: HerderRun) -> tuple[str, int]:
    match = wait_for(lambda: PORT_LINE.search(run.stderr), what=lambda: f"the port line; stderr {run.stderr}")
    return match[1], int(match[2])


def refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_tasks_share_a_namespace_and_only_the_mapped_port_reaches_it(tmp_path: Path, config_file: Path) -> None:
    [inside] = free_ports(1)
    data_dir = tmp_path / "data"
    run = HerderRun(write_job(tmp_path, inside), data_dir, config=config_file)
    try:
        run.wait_for("Started", count=2, timeout=60)
        [alloc_id] = alloc_ids(data_dir)
        address, port = host_port(run)
        assert port != inside
        env = json.loads(read_url(f"http://{address}:{port}/"))
        # The client reached the server on 127.0.0.1 of their shared namespace.
        log = data_dir / "allocs" / alloc_id / "alloc" / "logs" / "client.stdout.0"
        said = wait_for(lambda: log.exists() and log.read_text(), what="the client's answer")
        assert said.startswith("sibling said {")
        # The port inside is the namespace's own: nothing on the host's loopback answers there.
        assert refused(inside)
        assert env["NOMAD_PORT_http"] == env["NOMAD_ALLOC_PORT_http"] == str(inside)
        assert env["NOMAD_HOST_PORT_http"] == str(port)
        assert env["NOMAD_ADDR_http"] == env["NOMAD_HOST_ADDR_http"] == f"{address}:{port}"
        assert env["NOMAD_IP_http"] == address
        alloc_ip = env["NOMAD_ALLOC_IP_http"]
        assert alloc_ip.startswith("172.26.") and env["NOMAD_ALLOC_ADDR_http"] == f"{alloc_ip}:{inside}"
        veth = host_veth(alloc_id)
        assert veth is not None
        assert leftovers(alloc_id), "the namespace and its rules are there while it runs"
    finally:
        assert run.interrupt() == 0, run.stderr
    assert leftovers(alloc_id, [veth]) == []


def test_a_killed_herder_leaves_nothing_once_started_again(tmp_path: Path, config_file: Path) -> None:
    [inside] = free_ports(1)
    data_dir, job = tmp_path / "data", write_job(tmp_path, inside)
    first = HerderRun(job, data_dir, config=config_file)
    first.wait_for("Started", count=2, timeout=60)
    [alloc_id] = alloc_ids(data_dir)
    veth = wait_for(lambda: host_veth(alloc_id), what="the allocation's veth")
    first.kill()
    assert leftovers(alloc_id), "nothing removed the killed herder's namespace"
    second = HerderRun(job, data_dir, config=config_file)
    try:
        second.wait_for("Started", count=2, timeout=60)  # the job anew, beside the orphan it reaped
        wait_for(lambda: leftovers(alloc_id, [veth]) == [],
                 what=lambda: f"the orphan's network removed; left: {leftovers(alloc_id, [veth])}")
    finally:
        assert second.interrupt() == 0, second.stderr


def test_a_reattached_allocation_keeps_its_namespace(tmp_path: Path, config_file: Path) -> None:
    [inside] = free_ports(1)
    data_dir, job = tmp_path / "data", write_job(tmp_path, inside)
    first = HerderRun(job, data_dir, "--keep", config=config_file)
    first.wait_for("Started", count=2, timeout=60)
    [alloc_id] = alloc_ids(data_dir)
    address, port = host_port(first)
    before = json.loads(read_url(f"http://{address}:{port}/"))
    veth = host_veth(alloc_id)
    first.kill()
    second = HerderRun(job, data_dir, "--keep", config=config_file)
    try:
        second.wait_for("Reattached", count=2, timeout=60)
        assert second.of("Started") == []
        assert json.loads(read_url(f"http://{address}:{port}/")) == before
        assert host_veth(alloc_id) == veth
    finally:
        assert second.interrupt() == 0, second.stderr
    assert leftovers(alloc_id, [veth]) == []



def test_mode_none_has_a_loopback_and_nothing_else(tmp_path: Path, config_file: Path) -> None:
    [inside] = free_ports(1)
    data_dir = tmp_path / "data"
    run = HerderRun(write_job(tmp_path, inside, mode="none"), data_dir, config=config_file)
    try:
        run.wait_for("Started", count=2, timeout=60)
        [alloc_id] = alloc_ids(data_dir)
        log = data_dir / "allocs" / alloc_id / "alloc" / "logs" / "client.stdout.0"
        said = wait_for(lambda: log.exists() and log.read_text(), what="the client's answer")
        env = json.loads(said.removeprefix("sibling said "))
        assert env["NOMAD_PORT_http"] == str(inside) and "NOMAD_ALLOC_IP_http" not in env
        assert host_veth(alloc_id) is None  # no interface but its loopback
        _, port = host_port(run)
        assert refused(port) and refused(inside)
    finally:
        assert run.interrupt() == 0, run.stderr
