"""Store.transaction(): several writes as one, all or nothing."""

from __future__ import annotations

import threading

import pytest

from herder.objects import TaskEvent
from herder.state import AllocRecord, JobRecord, Store
from tests.core.state.factory import make_alloc, stored_task


class Boom(Exception):
    pass


def test_writes_of_a_block_are_committed_together(store: Store, job: JobRecord) -> None:
    with Store(store.path) as other:  # another connection, as another process would have
        with store.transaction():
            store.put_alloc(*make_alloc("a1", job))
            store.update_task("a1", "web", restarts=1)
            store.add_event("a1", "web", TaskEvent(type="Restarting"))
            assert stored_task(store, "a1", "web").restarts == 1  # it sees its own writes
            assert other.alloc("a1") is None
        assert stored_task(other, "a1", "web").restarts == 1
        assert len(other.events("a1")) == 1


def test_a_block_that_raises_writes_nothing(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    with pytest.raises(Boom), store.transaction():
        store.update_task("a1", "web", restarts=1)
        store.add_event("a1", "web", TaskEvent(type="Restarting"))
        store.put_alloc(*make_alloc("a2", job))
        raise Boom
    assert stored_task(store, "a1", "web").restarts == 0
    assert store.events("a1") == []
    assert store.alloc("a2") is None
    store.put_alloc(*make_alloc("a3", job))  # the store is usable afterwards
    assert store.alloc("a3") is not None


def test_a_nested_block_joins_the_outer_one(store: Store, job: JobRecord) -> None:
    with pytest.raises(Boom), store.transaction():
        with store.transaction():
            store.put_alloc(*make_alloc("a1", job))
        raise Boom
    assert store.alloc("a1") is None


def test_a_nested_block_that_raises_undoes_only_its_own_writes(store: Store, job: JobRecord) -> None:
    with store.transaction():
        store.put_alloc(*make_alloc("a1", job))
        with pytest.raises(Boom), store.transaction():
            store.put_alloc(*make_alloc("a2", job))
            raise Boom
        # A failing write inside a block is such a nested block too.
        with pytest.raises(KeyError):
            store.update_task("a1", "nope", restarts=1)
        store.put_alloc(*make_alloc("a3", job))
    assert [alloc.id for alloc in store.allocs()] == ["a1", "a3"]


def test_other_threads_wait_for_the_block(store: Store, job: JobRecord) -> None:
    seen: list[AllocRecord | None] = []
    reader = threading.Thread(target=lambda: seen.append(store.alloc("a1")))
    with store.transaction():
        store.put_alloc(*make_alloc("a1", job))
        reader.start()
        reader.join(0.2)
        assert reader.is_alive()  # it waits for the lock, and never sees half a transaction
        store.update_alloc("a1", status="running")
    reader.join(30)
    assert [alloc.status if alloc else None for alloc in seen] == ["running"]

