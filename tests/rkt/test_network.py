"""A rkt task in its allocation's network namespace, with the real rkt and the fly stage1: ``rkt run`` and
``rkt enter`` run there, the pod shares it (``--net=host``), and the group's ``dns`` reaches the pod.

That the task reaches the namespace's ``127.0.0.1`` is the conformance kit's test (test_contract.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from herder import DriverError, NetworkDNS
from herder.testing.plugin import HarnessFactory
from tests.support.waiting import wait_for

from .helpers import sh

INTERFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '"
"""The network interfaces the shell sees: in the kit's bare namespace, its loopback alone."""


def test_the_pod_and_its_exec_share_the_namespace_with_the_groups_dns(driver_harness: HarnessFactory,
                                                                       rkt_plugin_config: dict[str, Any]) -> None:
    harness = driver_harness("rkt", rkt_plugin_config)
    run = harness.task(sh(f"{INTERFACES}; cat /etc/resolv.conf; echo up > /local/up; exec sleep 3600", debug=True),
                       group_network=True, kill_timeout="1s")
    assert run.network is not None
    run.ctx.network = run.network = dataclasses.replace(
        run.network, dns=NetworkDNS(servers=("192.0.2.53",), searches=("svc.example",), options=("ndots:3",)))
    run.start()
    wait_for(lambda: run.local_file("up").is_file(), what=lambda: f"the task up: {run.output('stderr')[-2000:]!r}")
    lines = run.output().decode().splitlines()
    assert lines[0] == "lo", f"the pod sees the interfaces {lines}, not the namespace's loopback alone"
    assert "nameserver 192.0.2.53" in lines and "search svc.example" in lines, lines
    assert b"--net=host" in run.output("stderr")
    inside = run.exec(["/bin/sh", "-c", INTERFACES], 10)
    assert (inside.exit_code, inside.output) == (0, b"lo\n"), inside


def test_a_network_other_than_the_allocations_is_refused(driver_harness: HarnessFactory,
                                                         rkt_plugin_config: dict[str, Any]) -> None:
    harness = driver_harness("rkt", rkt_plugin_config)
    run = harness.task(sh("true", net=["default"]), group_network=True)
    with pytest.raises(DriverError, match=r"config\.net: the task's group has a network of its own"):
        run.prestart()
