"""What a killed herder left of an allocation's network is found in the state database and removed."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

from herder.client.config import ClientConfig
from herder.client.network import AllocNetworks
from herder.client.network import namespace as namespaces
from herder.context import AllocatedPort
from herder.model import GroupNetwork
from herder.objects import Alloc
from herder.plugins.hooks import Hooks
from herder.plugins.loader import load_plugins
from herder.state import Store
from tests.core.state.factory import make_alloc, make_job
from tests.support.consul import free_ports
from tests.support.network import host_veth, leftovers

BRIDGE = GroupNetwork(mode="bridge")


def _setup(tmp_path: Path) -> tuple[Store, AllocNetworks, Alloc]:
    store = Store(tmp_path / "state.db")
    job = make_job()
    store.put_job(job)
    record, tasks, _ = make_alloc(str(uuid.uuid4()), job)
    store.put_alloc(record, tasks, [])
    (tmp_path / "data" / "allocs" / record.id).mkdir(parents=True)  # where the fixture looks for what is left
    alloc = Alloc(id=record.id, name=record.name, index=0, job_name="shop", group_name="web", dir=tmp_path, tasks=[])
    return store, AllocNetworks(ClientConfig(), store, Hooks(load_plugins({}))), alloc


def test_the_network_of_an_allocation_that_is_over_is_removed_at_the_next_start(tmp_path: Path) -> None:
    store, networks, alloc = _setup(tmp_path)
    with store:
        [host_port] = free_ports(1)
        joined = networks.attach(alloc, BRIDGE, [AllocatedPort(label="http", value=host_port, to=8080)], "")
        assert joined.path == namespaces.namespace_path(alloc.id) and joined.ip.startswith("172.26.")
        veth = host_veth(alloc.id)
        assert veth is not None and leftovers(alloc.id)
        store.update_alloc(alloc.id, status="running")
        # A herder killed now, then started again: the allocation still runs, its network stays.
        assert AllocNetworks(ClientConfig(), store, networks.hooks).remove_stale() == []
        assert networks.attach(alloc, BRIDGE, [], "") == joined  # reattached: the same namespace and address
        store.update_alloc(alloc.id, status="complete")  # its tasks ended, and herder was killed again
        assert AllocNetworks(ClientConfig(), store, networks.hooks).remove_stale() == [alloc.id]
        assert leftovers(alloc.id, [veth]) == []
        assert store.network(alloc.id) is None


def test_a_half_made_network_is_removed_and_made_anew(tmp_path: Path) -> None:
    store, networks, alloc = _setup(tmp_path)
    with store:
        first = networks.attach(alloc, BRIDGE, [], "")
        veth = host_veth(alloc.id)
        record = store.network(alloc.id)
        assert record is not None
        store.put_network(dataclasses.replace(record, result=None))  # killed before ADD's result was stored
        again = networks.attach(alloc, BRIDGE, [], "web")
        assert again.hostname == "web" and host_veth(alloc.id) != veth
        assert first.path == again.path
        networks.detach(alloc)
        assert leftovers(alloc.id, [veth]) == [] and store.network(alloc.id) is None
