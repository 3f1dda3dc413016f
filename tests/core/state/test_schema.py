"""Opening state.db: creating, migrating, and refusing what is not ours."""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from pathlib import Path

import pytest

from herder.state import ParentRecord, PreviousRecord, StateError, Store, schema
from tests.core.state.factory import make_alloc, make_job

TABLES = {"jobs", "allocs", "tasks", "ports", "events", "deferred", "parents", "previous", "versions",
          "deployments", "networks"}


def pragma(path: Path, name: str) -> int:
    db = sqlite3.connect(path)
    try:
        value: int = db.execute(f"PRAGMA {name}").fetchone()[0]
        return value
    finally:
        db.close()


def tables(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        db.close()


def test_creates_the_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    assert pragma(path, "user_version") == len(schema.MIGRATIONS)
    assert pragma(path, "application_id") == schema.APPLICATION_ID
    assert tables(path) == TABLES
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_migrates_an_empty_database_at_version_0(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    sqlite3.connect(path).close()  # an empty file is a database with no tables, at version 0
    assert pragma(path, "user_version") == 0
    with Store(path) as store:
        assert store.integrity_check() == []
    assert tables(path) == TABLES


def test_reopening_keeps_the_data(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    job = make_job()
    with Store(path) as store:
        store.put_job(job)
        store.put_alloc(*make_alloc("a1", job))
    with Store(path) as store:
        assert store.job(job.id) == job
        assert len(store.tasks("a1")) == 3


def test_runs_new_migrations_once_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    job = make_job()
    with Store(path) as store:
        store.put_job(job)
    known = len(schema.MIGRATIONS)
    ran: list[int] = []

    def add_notes(db: sqlite3.Connection) -> None:
        ran.append(known + 1)
        db.execute("CREATE TABLE notes (job_id TEXT REFERENCES jobs (id), note TEXT)")
        db.execute("INSERT INTO notes SELECT id, 'from version 1' FROM jobs")

    def add_index(db: sqlite3.Connection) -> None:
        ran.append(known + 2)
        db.execute("CREATE INDEX notes_by_job ON notes (job_id)")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, add_notes, add_index])
    Store(path).close()
    Store(path).close()
    assert ran == [known + 1, known + 2]
    assert pragma(path, "user_version") == known + 2
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT job_id, note FROM notes").fetchall() == [(job.id, "from version 1")]
    finally:
        db.close()


def test_a_failed_migration_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    Store(path).close()

    def half_done(db: sqlite3.Connection) -> None:
        db.execute("CREATE TABLE notes (note TEXT)")
        db.execute("INSERT INTO nowhere VALUES (1)")

    known = len(schema.MIGRATIONS)
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, half_done])
    with pytest.raises(StateError, match=f"migration to schema version {known + 1} failed"):
        Store(path)
    assert pragma(path, "user_version") == known
    assert tables(path) == TABLES


def test_a_version_1_database_gains_the_registered_jobs_keeping_its_data(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    job = make_job()
    with monkeypatch.context() as before:
        before.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
        with Store(path) as store:
            store.put_job(job)
    assert "parents" not in tables(path)
    with Store(path) as store:
        assert store.job(job.id) == job and store.parents() == []
        parent = ParentRecord(name="nightly", source="api", text="{}", registered_at=1.0)
        store.put_parent(parent)
        assert store.parents() == [parent]
    assert pragma(path, "user_version") == len(schema.MIGRATIONS)
    assert tables(path) == TABLES


def test_a_version_2_database_numbers_the_submissions_of_its_allocations(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    first, second = make_job(), dataclasses.replace(make_job("job \"shop\" {}"), created_at=time.time() + 1)
    with monkeypatch.context() as before:
        before.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
        with Store(path) as store:
            for job in (second, first):  # stored in another order than submitted
                store.put_job(job)
                store.put_alloc(*make_alloc(f"alloc-{job.id}", job))
    with Store(path) as store:
        found = store.versions(first.name)
        assert [(v.version, v.job_id, v.submitted_at, v.stable) for v in found] == \
            [(0, first.id, first.created_at, False), (1, second.id, second.created_at, False)]
    assert tables(path) == TABLES


def test_refuses_a_newer_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StateError, match=f"state.db has schema version 99, this herder knows up to "
                                         f"{len(schema.MIGRATIONS)}"):
        Store(path)


def test_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"this is not a database\n" * 200)
    with pytest.raises(StateError) as caught:
        Store(path)
    assert str(path) in str(caught.value)
    assert path.read_bytes() == b"this is not a database\n" * 200


def test_refuses_another_programs_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE things (id INTEGER)")
    db.close()
    with pytest.raises(StateError, match="not a herder state database"):
        Store(path)

    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 1")
    db.close()
    with pytest.raises(StateError, match="not a herder state database"):
        Store(path)


def test_refuses_a_path_it_cannot_open(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "state.db"
    with pytest.raises(StateError, match="missing"):
        Store(path)


def test_a_version_2_database_gains_what_each_allocation_replaces_keeping_its_data(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "state.db"
    job = make_job()
    with monkeypatch.context() as before:
        before.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
        with Store(path) as store:
            store.put_job(job)
            for alloc_id in ("a1", "a2"):
                store.put_alloc(*make_alloc(alloc_id, job))
    assert "previous" not in tables(path)
    with Store(path) as store:
        assert store.previous("a2") is None and store.replacement("a1") is None
        link = PreviousRecord(alloc_id="a2", previous="a1", events=[{"time": 1.0, "previous": "a1", "delay": 5.0}])
        store.put_previous(link)
        assert store.previous("a2") == link and store.replacement("a1") == "a2"
        assert store.awaited() == {"a1"}  # a2 has not started: it may still take a1's alloc/data
        store.update_alloc("a2", status="running")
        assert store.awaited() == set()
        store.delete_alloc("a2")
        assert store.previous("a2") is None and store.replacement("a1") is None
    assert tables(path) == TABLES
