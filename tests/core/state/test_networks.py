"""The allocations' network namespaces in the state database: kept until removed, found once the allocation is over."""

from __future__ import annotations

from pathlib import Path

from herder.state import NetworkRecord, Store
from tests.core.state.factory import make_alloc, make_job


def test_a_network_is_stale_once_its_allocation_is_over_or_gone(tmp_path: Path) -> None:
    with Store(tmp_path / "state.db") as store:
        job = make_job()
        store.put_job(job)
        for index, alloc_id in enumerate(("a1", "a2", "a3")):
            store.put_alloc(*make_alloc(alloc_id, job, index=index, port_base=20000 + 10 * index))
        records = {alloc_id: NetworkRecord(alloc_id=alloc_id, mode="bridge", path=f"/var/run/netns/herder-{alloc_id}",
                                           conflist='{"name": "nomad"}', created_at=1.0)
                   for alloc_id in ("a1", "a2", "a3", "gone")}
        for record in records.values():
            store.put_network(record)
        done = NetworkRecord(**{**records["a1"].__dict__, "result": {"ips": [{"address": "172.26.64.2/20"}]},
                                "port_mappings": [{"hostPort": 2000, "containerPort": 80, "protocol": "tcp"}],
                                "driver": "docker", "labels": {"container": "c1"}})
        store.put_network(done)  # replaces the record made before the attachment
        assert store.network("a1") == done
        store.update_alloc("a2", status="complete")
        store.update_alloc("a3", status="running")
        assert [record.alloc_id for record in store.stale_networks()] == ["a2", "gone"]
        store.remove_network("a2")
        assert store.network("a2") is None
        assert [record.alloc_id for record in store.stale_networks()] == ["gone"]
