"""The schema of ``state.db`` and its migrations.

The schema version is SQLite's ``PRAGMA user_version``: the number of
migrations applied. ``MIGRATIONS[n]`` takes a database from version ``n`` to
``n + 1``; :class:`~herder.state.database.Database` runs the missing ones in order,
all in one transaction, so a database is never left half-migrated. Append new
migrations; never change one that has shipped.

A migration runs inside that transaction with foreign keys enforced, and
``PRAGMA foreign_keys`` cannot be switched off there: one that rebuilds a
table must use ``PRAGMA defer_foreign_keys = ON`` instead.

Dicts and lists are stored as JSON text. Enumerations (statuses, task
states) are checked in Python rather than by ``CHECK`` constraints, because
SQLite cannot alter a constraint without rebuilding the table.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

APPLICATION_ID = 0x48524452
"""``PRAGMA application_id`` of a herder state database ("HRDR"), so that
another program's SQLite file is not mistaken for one."""

Migration = Callable[[sqlite3.Connection], None]

_SCHEMA_1 = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    """
    CREATE TABLE jobs (
        id         TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        source     TEXT NOT NULL,
        format     TEXT NOT NULL,
        text       TEXT NOT NULL,
        variables  TEXT NOT NULL,  -- JSON object
        created_at REAL NOT NULL
    )
    """,
    """
    CREATE TABLE allocs (
        id         TEXT PRIMARY KEY,
        job_id     TEXT NOT NULL REFERENCES jobs (id),
        name       TEXT NOT NULL,
        "index"    INTEGER NOT NULL,
        job_name   TEXT NOT NULL,
        group_name TEXT NOT NULL,
        dir        TEXT NOT NULL,
        session    TEXT NOT NULL,
        keep       INTEGER NOT NULL,
        status     TEXT NOT NULL,
        desired    TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )
    """,
    # Rowid tables, so that rowid order is the order the group lists its tasks in.
    """
    CREATE TABLE tasks (
        alloc_id             TEXT NOT NULL REFERENCES allocs (id) ON DELETE CASCADE,
        name                 TEXT NOT NULL,
        driver               TEXT NOT NULL,
        state                TEXT NOT NULL,
        failed               INTEGER NOT NULL,
        restarts             INTEGER NOT NULL,
        exit_code            INTEGER,
        handle_state         TEXT,           -- JSON object, or NULL
        created              TEXT NOT NULL,  -- JSON list of [kind, value]
        restart_count        INTEGER NOT NULL,
        restart_window_start REAL,
        started_at           REAL,
        finished_at          REAL,
        PRIMARY KEY (alloc_id, name)
    )
    """,
    """
    CREATE TABLE ports (
        alloc_id TEXT NOT NULL REFERENCES allocs (id) ON DELETE CASCADE,
        owner    TEXT NOT NULL,
        label    TEXT NOT NULL,
        value    INTEGER NOT NULL,
        "to"     INTEGER,
        host_ip  TEXT NOT NULL,
        PRIMARY KEY (alloc_id, owner, label)
    )
    """,
    # Events hang off the allocation, not the task row, so that put_alloc
    # replacing the task rows keeps the history. The rowid orders them.
    """
    CREATE TABLE events (
        id       INTEGER PRIMARY KEY,
        alloc_id TEXT NOT NULL REFERENCES allocs (id) ON DELETE CASCADE,
        task     TEXT NOT NULL,
        type     TEXT NOT NULL,
        time     TEXT NOT NULL,  -- RFC 3339
        message  TEXT NOT NULL,
        details  TEXT NOT NULL   -- JSON object
    )
    """,
    "CREATE INDEX events_by_task ON events (alloc_id, task, id)",
    """
    CREATE TABLE deferred (
        kind    TEXT NOT NULL,
        key     TEXT NOT NULL,
        payload TEXT NOT NULL,  -- JSON object
        due     REAL NOT NULL,
        PRIMARY KEY (kind, key)
    )
    """,
    "CREATE INDEX deferred_by_due ON deferred (due)",
)


def _create_schema(db: sqlite3.Connection) -> None:
    # One statement at a time: executescript() would commit the migration's
    # transaction first.
    for statement in _SCHEMA_1:
        db.execute(statement)


def _add_parents(db: sqlite3.Connection) -> None:
    # A job registered, not run (a periodic or parameterized one): its children are ordinary jobs and allocations.
    # Its document is kept here, not in ``jobs``, which holds the submissions allocations run.
    db.execute("""
        CREATE TABLE parents (
            name          TEXT PRIMARY KEY,
            source        TEXT NOT NULL,
            text          TEXT NOT NULL,  -- the canonical job document, JSON
            status        TEXT NOT NULL,  -- running | stopped
            last_launch   REAL,           -- epoch seconds of the latest child launched, NULL before one
            registered_at REAL NOT NULL
        )
    """)


def _add_previous(db: sqlite3.Connection) -> None:
    # The allocation an allocation replaces, and the replacements that led to it (its reschedule
    # tracker). No reference to the previous one: it may be collected before its replacement.
    db.execute("""
        CREATE TABLE previous (
            alloc_id TEXT PRIMARY KEY REFERENCES allocs (id) ON DELETE CASCADE,
            previous TEXT NOT NULL,
            events   TEXT NOT NULL  -- JSON list of {"time", "previous", "delay"}, oldest first
        )
    """)
    db.execute("CREATE INDEX previous_by_previous ON previous (previous)")


def _add_versions(db: sqlite3.Connection) -> None:
    # A job's versions, numbered from 0, and the deployments of them. A version names its submission
    # in ``jobs`` (kept while a version names it); the allocations already stored become the versions
    # they were submitted as, in order.
    db.execute("""
        CREATE TABLE versions (
            job          TEXT NOT NULL,
            version      INTEGER NOT NULL,
            job_id       TEXT NOT NULL REFERENCES jobs (id),
            counts       TEXT NOT NULL,  -- JSON object: group -> count, set by a scale over the file's
            submitted_at REAL NOT NULL,
            stable       INTEGER NOT NULL,
            PRIMARY KEY (job, version)
        )
    """)
    db.execute("""
        INSERT INTO versions (job, version, job_id, counts, submitted_at, stable)
        SELECT name, row_number() OVER (PARTITION BY name ORDER BY created_at, id) - 1, id, '{}', created_at, 0
        FROM jobs WHERE id IN (SELECT job_id FROM allocs)
    """)
    db.execute("""
        CREATE TABLE deployments (
            id          TEXT PRIMARY KEY,
            job         TEXT NOT NULL,
            version     INTEGER NOT NULL,
            status      TEXT NOT NULL,
            description TEXT NOT NULL,
            state       TEXT NOT NULL,  -- JSON object, the deployment engine's
            created_at  REAL NOT NULL,
            modified_at REAL NOT NULL
        )
    """)
    db.execute("CREATE INDEX deployments_by_job ON deployments (job, created_at)")


def _add_networks(db: sqlite3.Connection) -> None:
    # The allocations' network namespaces and CNI attachments. No reference to the allocation:
    # a row outlives it when a crash came between the allocation's end and the namespace's
    # removal, and the next herder removes what the row describes.
    db.execute("""
        CREATE TABLE networks (
            alloc_id      TEXT PRIMARY KEY,
            mode          TEXT NOT NULL,
            path          TEXT NOT NULL,
            driver        TEXT NOT NULL,  -- the driver that made the namespace, '' for herder
            labels        TEXT NOT NULL,  -- JSON object: the driver's facts about it
            conflist      TEXT NOT NULL,  -- the CNI configuration list, JSON
            port_mappings TEXT NOT NULL,  -- JSON list of portmap mappings
            result        TEXT,           -- the CNI result, JSON; NULL until the attachment is complete
            created_at    REAL NOT NULL
        )
    """)


MIGRATIONS: list[Migration] = [_create_schema, _add_parents, _add_previous, _add_versions, _add_networks]
"""Migration ``n`` (from 0) takes the schema from version ``n`` to ``n + 1``."""
