"""An exec task in its allocation's network namespace: the namespace's hostname, and the group's ``dns`` and
``hostname`` as its ``/etc/resolv.conf`` and ``/etc/hosts``, bound read-only over the host's, with the real runc.

That the task's processes are in the namespace at all is the conformance kit's test (test_contract.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder import NetworkDNS
from herder.testing.plugin import HarnessFactory

from .helpers import sh

SHOWS = ('hostname; echo ---; cat /etc/resolv.conf; echo ---; cat /etc/hosts; echo ---; '
         'if echo "nameserver 198.51.100.1" > /etc/resolv.conf; then echo writable; else echo read-only; fi')
DNS = NetworkDNS(servers=("192.0.2.53", "192.0.2.54"), searches=("svc.example", "example"), options=("ndots:2",))


@pytest.fixture
def no_host_network_files_change() -> Iterator[None]:
    before = {path: path.read_bytes() for path in (Path("/etc/resolv.conf"), Path("/etc/hosts"))}
    yield
    assert {path: path.read_bytes() for path in before} == before, "a task changed the host's files"


def test_the_network_gives_hostname_resolv_conf_and_hosts(exec_driver: str, driver_harness: HarnessFactory,
                                                           no_host_network_files_change: None) -> None:
    harness = driver_harness("exec")
    run = harness.task(sh(SHOWS), group_network=True)
    assert run.network is not None
    run.network = dataclasses.replace(run.network, ip="172.26.64.7", hostname="web-1", dns=DNS)
    run.ctx.network = run.network
    run.start()
    result = run.wait(30)
    output = run.output().decode()
    assert result is not None and result.exit_code == 0, (result, output, run.output("stderr"))
    hostname, resolv_conf, hosts, writable = (part.strip() for part in output.split("---\n"))
    assert hostname == "web-1"
    assert resolv_conf.splitlines() == ["search svc.example example", "nameserver 192.0.2.53",
                                        "nameserver 192.0.2.54", "options ndots:2"]
    assert hosts.splitlines()[1] == "127.0.0.1 localhost"
    assert hosts.splitlines()[-1] == "172.26.64.7 web-1"
    assert writable == "read-only"


def test_without_hostname_or_dns_the_task_sees_the_hosts_files(exec_driver: str,
                                                               driver_harness: HarnessFactory) -> None:
    harness = driver_harness("exec")
    run = harness.task(sh("cat /etc/resolv.conf /etc/hosts"), group_network=True)
    run.start()
    result = run.wait(30)
    assert result is not None and result.exit_code == 0, (result, run.output("stderr"))
    assert run.output() == Path("/etc/resolv.conf").read_bytes() + Path("/etc/hosts").read_bytes()


def test_what_the_dns_block_leaves_out_comes_from_the_host() -> None:
    netfiles = pytest.importorskip("herder_exec.netfiles")
    host = "# generated\nnameserver 10.0.0.2\nsearch corp.example\noptions edns0 rotate\n"
    assert netfiles.resolv_conf(NetworkDNS(servers=("192.0.2.53",)), host) == \
        "search corp.example\nnameserver 192.0.2.53\noptions edns0 rotate\n"
    assert netfiles.resolv_conf(NetworkDNS(searches=("a.example",), options=("ndots:1",)), host) == \
        "search a.example\nnameserver 10.0.0.2\noptions ndots:1\n"
