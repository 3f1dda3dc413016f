"""The group commit: writes committed together, in order, and kept across a full disk."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from herder.objects import TaskEvent
from herder.state import JobRecord, StateError, Store
from tests.core.state.factory import make_alloc, make_job, stored_task
from tests.support.disk import fill, small_disk
from tests.support.waiting import wait_for


def committed_restarts(path: Path, alloc_id: str, task: str) -> int:
    """What another connection reads: the committed state only."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        row = db.execute("SELECT restarts FROM tasks WHERE alloc_id = ? AND name = ?", (alloc_id, task)).fetchone()
    return int(row[0])


def test_a_write_nobody_waits_for_is_committed_soon_after(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    store.update_task("a1", "web", wait=False, restarts=1)
    wait_for(lambda: committed_restarts(store.path, "a1", "web") == 1, what="the write to be committed")


def test_a_read_sees_the_writes_made_before_it(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    store.update_task("a1", "web", wait=False, restarts=1)
    store.add_event("a1", "web", TaskEvent(type="Restarting"), wait=False)
    assert stored_task(store, "a1", "web").restarts == 1
    assert [event.type for _, event in store.events("a1")] == ["Restarting"]


def test_a_waiting_write_is_committed_with_every_write_made_before_it(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    for count in range(1, 51):
        store.update_task("a1", "web", wait=False, restarts=count)
    store.update_task("a1", "worker", restarts=1)
    assert committed_restarts(store.path, "a1", "web") == 50
    assert committed_restarts(store.path, "a1", "worker") == 1


def test_the_error_of_a_write_goes_to_its_waiter_only(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    store.update_task("a1", "web", wait=False, restarts=1)
    with pytest.raises(KeyError, match="no task nope"):
        store.update_task("a1", "nope", restarts=1)
    store.update_task("a1", "ghost", wait=False, restarts=1)  # logged by the commit, not raised
    store.update_task("a1", "worker", restarts=2)
    assert committed_restarts(store.path, "a1", "web") == 1
    assert committed_restarts(store.path, "a1", "worker") == 2


def test_updates_are_kept_across_a_full_disk_and_committed_once_there_is_room(tmp_path: Path) -> None:
    failures: list[StateError] = []
    recoveries: list[bool] = []
    with small_disk(tmp_path / "disk") as disk, \
            Store(disk / "state.db", on_failure=failures.append,
                  on_recovery=lambda: recoveries.append(True)) as store:
        job = make_job()
        store.put_job(job)
        store.put_alloc(*make_alloc("a1", job))
        filler = fill(disk)

        store.update_task("a1", "web", wait=False, restarts=1)
        store.add_event("a1", "web", TaskEvent(type="Restarting"), wait=False)
        wait_for(lambda: failures, what="the store to report that its commits fail")
        assert "database or disk is full" in str(failures[0])
        with pytest.raises(StateError, match="full"):  # a waiting update is told, and kept
            store.update_task("a1", "worker", restarts=2)
        with pytest.raises(StateError, match="full"):  # a new record is refused, not kept
            store.put_alloc(*make_alloc("a2", job))
        assert stored_task(store, "a1", "web").restarts == 0  # reads see what is committed

        filler.unlink()
        wait_for(lambda: recoveries, what="the store to commit again")
        assert stored_task(store, "a1", "web").restarts == 1
        assert stored_task(store, "a1", "worker").restarts == 2
        assert [event.type for _, event in store.events("a1")] == ["Restarting"]
        assert store.alloc("a2") is None
        assert len(failures) == 1
        assert store.integrity_check() == []


def test_a_transaction_is_refused_while_earlier_writes_cannot_be_committed(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk, Store(disk / "state.db") as store:
        job = make_job()
        store.put_job(job)
        store.put_alloc(*make_alloc("a1", job))
        filler = fill(disk)
        store.update_task("a1", "web", wait=False, restarts=1)
        ran = []
        with pytest.raises(StateError, match="full"), store.transaction():
            ran.append(True)
        assert ran == []  # it would have been committed before the writes made earlier
        filler.unlink()
        with store.transaction():
            store.update_task("a1", "worker", restarts=1)
        assert committed_restarts(store.path, "a1", "web") == 1
