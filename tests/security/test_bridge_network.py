"""herder (root) must never run the CNI plugins in, nor hand a task, a network namespace that is not
its allocation's.

A driver that owns an allocation's namespace (docker: a pause container) names it by a path that
outlives it: ``/proc/<pid>/ns/net``. When the pause container dies (a daemon restart, a reboot, with
herder down or not) that path names whatever process takes the pid next: a process of the host's
own network, which any local user can arrange by cycling pids, or another allocation's. The attack
stands for it with a namespace mounted at the path the driver gave, once the driver's is gone: a
bystander with its loopback up and an ``eth0``. The CNI plugins' DEL run there would take the
bystander's loopback down and delete its ``eth0`` (on the host: the host's); a reattached allocation
handed that path would run its tasks in the bystander's network.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder import Alloc, NetworkDNS, NetworkIsolation, Task
from herder.client.config import ClientConfig
from herder.client.network import AllocNetworks
from herder.context import AllocatedPort
from herder.model import GroupNetwork
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from herder.state import Store
from tests.core.state.factory import make_alloc, make_job
from tests.support.consul import free_ports
from tests.support.network import leftovers, remove_leftovers, require_networking

BRIDGE = GroupNetwork(mode="bridge")
NETNS = Path("/var/run/netns")


def _ip(*args: str) -> str:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=True).stdout


class PauseDriver:
    """The hooks of a driver that owns its allocations' namespaces, as docker's pause containers: the
    live one given again, a new one (a new pid, so a new path) once it died; removing it removes the
    live one, whatever path the caller names."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.live: str | None = None

    def alloc_network_create(self, alloc: Alloc, hostname: str,
                             dns: NetworkDNS | None = None) -> tuple[str, NetworkIsolation]:
        if self.live is None:
            self.live = f"herder-test-pause-{uuid.uuid4().hex[:12]}"
            self.names.append(self.live)
            _ip("netns", "add", self.live)
        return "pause", NetworkIsolation(path=NETNS / self.live, labels={})

    def alloc_network_destroy(self, driver: str, alloc: Alloc, isolation: NetworkIsolation) -> None:
        if self.live is not None:
            _ip("netns", "delete", self.live)
            self.live = None

    def die(self) -> str:
        """The pause container dies: its namespace goes; a bystander's is at its path from now on."""
        assert self.live is not None
        name, self.live = self.live, None
        _ip("netns", "delete", name)
        _ip("netns", "add", name)
        _ip("-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0")
        for link in ("lo", "eth0", "peer0"):
            _ip("-n", name, "link", "set", link, "up")
        return name


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Store, AllocNetworks, Alloc, PauseDriver]]:
    require_networking()
    store = Store(tmp_path / "state.db")
    job = make_job()
    store.put_job(job)
    record, _, _ = make_alloc(str(uuid.uuid4()), job)
    alloc = Alloc(id=record.id, name=record.name, index=0, job_name="shop", group_name="web", dir=tmp_path,
                  tasks=[Task(name="t", driver="pause")])
    store.put_alloc(record, [], [])
    driver = PauseDriver()
    with store:
        try:
            yield store, AllocNetworks(ClientConfig(), store, driver), alloc, driver  # type: ignore[arg-type]
        finally:
            for name in driver.names:
                subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30, check=False)
            left = leftovers(alloc.id)
            remove_leftovers(alloc.id)
            assert not left, f"left behind: {left}"


def _bystander_intact(name: str) -> None:
    links = _ip("-n", name, "-o", "link", "show")
    assert "eth0" in links, f"the CNI plugins deleted the bystander's eth0: {links}"
    assert "state UNKNOWN" in _ip("-n", name, "-o", "link", "show", "lo"), "the bystander's loopback was taken down"


def test_the_plugins_never_run_in_a_namespace_that_took_a_dead_ones_path(
        setup: tuple[Store, AllocNetworks, Alloc, PauseDriver]) -> None:
    store, networks, alloc, driver = setup
    networks.attach(alloc, BRIDGE, [], "")
    bystander = driver.die()
    store.update_alloc(alloc.id, status="complete")
    networks.detach(alloc)
    _bystander_intact(bystander)
    assert store.network(alloc.id) is None


def test_a_reattached_allocation_never_gets_a_namespace_that_took_a_dead_ones_path(
        setup: tuple[Store, AllocNetworks, Alloc, PauseDriver]) -> None:
    store, networks, alloc, driver = setup
    first = networks.attach(alloc, BRIDGE, [], "")
    bystander = driver.die()
    # herder restarts and reattaches the allocation, which still runs.
    again = AllocNetworks(ClientConfig(), store, driver).attach(alloc, BRIDGE, [], "")  # type: ignore[arg-type]
    assert again.path.stat().st_ino != (NETNS / bystander).stat().st_ino, "the tasks were handed the bystander's"
    assert again.ip == first.ip and f"inet {first.ip}/" in _ip("-n", again.path.name, "-o", "addr", "show", "eth0")
    _bystander_intact(bystander)
    networks.detach(alloc)


# Run as root inside an allocation's namespace (a task given NET_RAW: `allow_caps` and `cap_add`, or root in
# a raw_exec task joined to it): one UDP datagram in a hand-made frame to the bridge's MAC, addressed to
# argv[3] port argv[4]. Its own routes would keep 127.0.0.1 on its loopback: a packet socket does not ask them.
SPOOF = r"""
import socket, struct, sys
source, gateway_mac, destination, port, payload = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
own_mac = open("/sys/class/net/eth0/address").read().strip()
udp = struct.pack("!HHHH", 40000, port, 8 + len(payload), 0) + payload.encode()
header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(source), socket.inet_aton(destination))
total = sum(struct.unpack("!10H", header))
total = (total & 0xFFFF) + (total >> 16)
header = header[:10] + struct.pack("!H", ~((total & 0xFFFF) + (total >> 16)) & 0xFFFF) + header[12:]
frame = bytes.fromhex(gateway_mac.replace(":", "")) + bytes.fromhex(own_mac.replace(":", "")) + b"\x08\x00"
with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as raw:
    raw.bind(("eth0", 0))
    raw.send(frame + header + udp)
"""


def test_a_task_in_the_bridge_network_never_reaches_the_hosts_loopback(
        setup: tuple[Store, AllocNetworks, Alloc, PauseDriver]) -> None:
    """The portmap plugin sets ``route_localnet`` on the bridge (so that the host reaches mapped ports on
    127.0.0.1): the kernel then takes packets for 127.0.0.0/8 arriving on the bridge, for whatever listens
    on the host's loopback only (the agent, Consul, a database)."""
    store, _, alloc, _ = setup
    [mapped, listening] = free_ports(2)
    networks = AllocNetworks(ClientConfig(), store, Hooks(load_plugins({})))  # herder's own namespace
    joined = networks.attach(alloc, BRIDGE, [AllocatedPort(label="http", value=mapped, to=8080)], "")
    try:
        bridge = ClientConfig().bridge_network_name
        gateway_mac = Path(f"/sys/class/net/{bridge}/address").read_text().strip()
        gateway_ip = _ip("-4", "-o", "addr", "show", "dev", bridge).split()[3].split("/")[0]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as host:
            host.bind(("0.0.0.0", listening))  # both destinations below reach it
            host.settimeout(30)
            for destination, payload in (("127.0.0.1", "to-loopback"), (gateway_ip, "to-gateway")):
                subprocess.run(["ip", "netns", "exec", joined.path.name, sys.executable, "-c", SPOOF, joined.ip,
                                gateway_mac, destination, str(listening), payload], check=True, timeout=30)
            # In order, on one link: the datagram to the gateway's address comes after the other, if that came.
            received = host.recv(100).decode()
        assert received == "to-gateway", "a datagram from the allocation reached a socket on the host's loopback"
    finally:
        networks.detach(alloc)


def test_a_network_whose_namespace_is_gone_leaves_no_rule_behind(
        setup: tuple[Store, AllocNetworks, Alloc, PauseDriver]) -> None:
    """After a reboot the namespaces are gone, the state database and the iptables rules are not (an
    iptables-restore at boot, or a host that was not rebooted but had its namespace removed): the bridge
    plugin finds the masquerading rules it removes through the address of the namespace's eth0."""
    store, _, alloc, _ = setup
    networks = AllocNetworks(ClientConfig(), store, Hooks(load_plugins({})))
    networks.attach(alloc, BRIDGE, [], "")
    _ip("netns", "delete", f"herder-{alloc.id}")
    store.update_alloc(alloc.id, status="complete")
    assert AllocNetworks(ClientConfig(), store, networks.hooks).remove_stale() == [alloc.id]
    assert leftovers(alloc.id) == []
