"""Many threads on one store, and several stores (processes) on one file."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from herder.state import JobRecord, Store
from tests.core.state import writer
from tests.core.state.factory import make_job, stored_task
from tests.core.state.writer import write_allocs

THREADS = 8
ALLOCS_PER_THREAD = 15


def assert_all_written(store: Store, prefixes: list[str], count: int) -> None:
    assert store.integrity_check() == []
    for prefix in prefixes:
        allocs = store.allocs(session=prefix)
        assert [alloc.id for alloc in allocs] == [f"{prefix}-{number}" for number in range(count)]
        for alloc in allocs:
            assert alloc.status == "running"
            assert stored_task(store, alloc.id, "web").restarts == 1
            assert [event.type for _, event in store.events(alloc.id)] == ["Restarting"]


def run_threads(targets: list[Callable[[], None]]) -> None:
    """Run the targets at once; re-raise the first failure."""
    start = threading.Barrier(len(targets))

    def run(target: Callable[[], None]) -> None:
        start.wait()
        target()

    with ThreadPoolExecutor(len(targets)) as pool:
        for future in [pool.submit(run, target) for target in targets]:
            future.result()


def test_threads_share_one_store(store: Store, job: JobRecord) -> None:
    prefixes = [f"t{number}" for number in range(THREADS)]
    run_threads([partial(write_allocs, store, job, prefix, ALLOCS_PER_THREAD) for prefix in prefixes])
    assert_all_written(store, prefixes, ALLOCS_PER_THREAD)


def test_stores_on_one_file_wait_for_each_other(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    prefixes = [f"s{number}" for number in range(4)]
    stores: list[Store] = []
    try:
        # Opened at once: the first creates the schema, the others find it.
        run_threads([lambda: stores.append(Store(path)) for _ in prefixes])
        job = make_job()
        stores[0].put_job(job)
        run_threads([partial(write_allocs, store, job, prefix, ALLOCS_PER_THREAD)
                     for store, prefix in zip(stores, prefixes, strict=True)])
    finally:
        for store in stores:
            store.close()
    with Store(path) as store:
        assert_all_written(store, prefixes, ALLOCS_PER_THREAD)


def test_a_writer_waits_for_another_connections_transaction(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    job = make_job()
    with Store(path) as first, Store(path) as second:
        first.put_job(job)
        waiting = threading.Thread(target=write_allocs, args=(second, job, "second", 1))
        with first.transaction():
            write_allocs(first, job, "first", 1)
            waiting.start()
            waiting.join(0.3)
            assert waiting.is_alive()  # blocked on the database lock, not failed
        waiting.join(30)
        assert not waiting.is_alive()
        assert_all_written(first, ["first", "second"], 1)


def test_two_processes_write_to_one_file(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    count = 300
    with Store(path) as store:
        job = make_job()
        store.put_job(job)
        with writer.start("burst", str(path), "child", str(count)) as child:
            try:
                assert child.stdout is not None
                assert child.stdout.readline() == b"writing\n"
                write_allocs(store, job, "parent", count)
                assert child.wait(60) == 0
            finally:
                child.kill()
        assert_all_written(store, ["parent", "child"], count)
