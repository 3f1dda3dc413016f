"""The client's durable state: one SQLite database, ``<data_dir>/state.db``."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from herder.errors import HerderError
from herder.objects import TaskEvent
from herder.state import schema
from herder.state.records import (
    LIVE_STATUSES,
    AllocRecord,
    AllocStatus,
    Deferred,
    DesiredStatus,
    JobRecord,
    ParentRecord,
    ParentStatus,
    PortRecord,
    TaskRecord,
    TaskState,
    check_choice,
)

log = logging.getLogger(__name__)

EVENTS_KEPT = 100
"""How many events the store keeps per task; older ones are dropped."""

BUSY_TIMEOUT = 10.0
"""Seconds a write waits for another connection (another herder process on
the same data dir) to finish its transaction before failing."""

GROUP_DELAY = 0.003
"""Seconds a write that nobody waits for is held before its commit, so that
the writes of those moments (of every runner) are committed together."""

MAX_PENDING = 256
"""Writes nobody waits for that may be pending at once: a writer that makes more, faster than the
committer commits them, commits them itself (back pressure), so that a commit stays small."""

RETRY_INTERVAL = 1.0
"""Seconds between two attempts to commit the writes kept after a failed
commit (a full disk, say)."""

_ALLOC_UPDATABLE = frozenset({"status", "desired", "session", "keep"})
_TASK_UPDATABLE = frozenset(f.name for f in fields(TaskRecord)) - {"alloc_id", "name"}
_LIVE = ", ".join(f"'{status}'" for status in LIVE_STATUSES)


class StateError(HerderError):
    """The state database cannot be used: it is corrupt, not herder's, newer
    than this herder, or SQLite failed (disk full, locked too long...)."""


@dataclass(frozen=True)
class Transactions:
    """The store's transactions since it was opened (group commits and :meth:`Store.transaction`
    blocks alike): how many committed, how many did not, and their time from ``BEGIN`` to the end."""

    committed: int = 0
    failed: int = 0
    seconds: float = 0.0


class _Write:
    """A write on its way to a commit: a function of SQL statements, run in
    a savepoint of the group's transaction."""

    __slots__ = ("apply", "done", "error", "result", "retry", "waited")

    def __init__(self, apply: Callable[[], Any], *, retry: bool, waited: bool) -> None:
        self.apply = apply
        self.retry = retry  # kept for the next commit if this one fails
        self.waited = waited  # its waiter takes its error; else the commit logs it
        self.done = threading.Event()  # its commit succeeded or failed
        self.result: Any = None
        self.error: BaseException | None = None

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class Store:
    """The client's state: jobs, allocations, task states, ports, events and
    deferred work, in the SQLite database at ``path`` (created if missing).

    Every public write is atomic, and the writes of a few milliseconds are
    committed together, in the order they were made (a group commit): the
    writes of every runner in one transaction rather than one transaction
    each. A write either waits for its commit (the default), or with
    ``wait=False`` returns at once and is committed within
    :data:`GROUP_DELAY` seconds, or by the next write that waits or the next
    read (or by itself, when :data:`MAX_PENDING` writes are already
    pending). :meth:`transaction` makes several writes one. A commit is atomic: a
    process killed at any instant leaves the database as of its last commit,
    never half of a write, and never a write without the ones made before it.
    The journal is a write-ahead log synced at checkpoints only
    (``synchronous = NORMAL``), so a power loss or an OS crash may lose the
    last few commits, but still never half of one.

    When a commit fails (a full disk, say), the writes that only change
    records (updates, events, ports released, deferred work) are kept and
    committed with the next commit, tried again every :data:`RETRY_INTERVAL`
    seconds; those that create records or decide something (``put_job``,
    ``put_alloc``, ``claim_alloc``, :meth:`transaction`) fail and are undone.
    ``on_failure`` is called when commits start failing and ``on_recovery``
    when one succeeds again. A waiting write raises :class:`StateError` when
    its commit failed, at once while commits fail and no retry is due.

    One connection serves every thread, behind a lock. Several processes may
    open the same file: a writer waits up to :data:`BUSY_TIMEOUT` seconds for
    the others. Any SQLite failure is raised as :class:`StateError`.
    """

    def __init__(self, path: Path, *, on_failure: Callable[[StateError], None] | None = None,
                 on_recovery: Callable[[], None] | None = None) -> None:
        self.path = path
        self._lock = threading.RLock()  # the connection
        self._depth = 0  # how many transaction() blocks are open
        self._owner: int | None = None  # the thread whose transaction() block is open
        self._queue = threading.Condition()  # guards what follows
        self._pending: list[_Write] = []
        self._failure: StateError | None = None  # why the last commit failed; None once one succeeds
        self._retry_at = 0.0
        self._committer: threading.Thread | None = None
        self._closing = False
        self._on_failure = on_failure or (lambda exc: None)
        self._on_recovery = on_recovery or (lambda: None)
        self._report_lock = threading.RLock()
        self._reported: StateError | None = None
        self._transactions = Transactions()
        try:
            _make_private(path)
            # isolation_level=None: the sqlite3 module opens no transaction
            # behind our back; transaction() issues BEGIN and COMMIT itself.
            self._db = sqlite3.connect(path, timeout=BUSY_TIMEOUT, isolation_level=None,
                                       check_same_thread=False)
        except (sqlite3.Error, OSError) as exc:
            raise StateError(f"{path}: {exc}") from exc
        try:
            # The first statement to read the file: a file that is not a
            # database fails here.
            self._use_wal()
            self._execute("PRAGMA synchronous = NORMAL")
            self._execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except BaseException:
            self._db.close()
            raise

    def _use_wal(self) -> None:
        """Switch the file to write-ahead logging, waiting out other connections.

        Changing the journal mode takes the database lock without calling the
        busy handler: herder processes opening a new file at once would fail
        with "database is locked" instead of waiting their turn.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT
        while True:
            try:
                self._db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise StateError(f"{self.path}: {exc}") from exc
            except sqlite3.Error as exc:
                raise StateError(f"{self.path}: {exc}") from exc
            time.sleep(0.01)

    def _migrate(self) -> None:
        known = len(schema.MIGRATIONS)
        # One write transaction, version read inside it: of two processes
        # opening a new database at once, the second sees the first's work.
        with self.transaction():
            version = self._execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                if self._execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StateError(f"{self.path} is not a herder state database (it has tables "
                                     "but no schema version)")
            elif self._execute("PRAGMA application_id").fetchone()[0] != schema.APPLICATION_ID:
                raise StateError(f"{self.path} is not a herder state database")
            if version > known:
                raise StateError(f"{self.path} has schema version {version}, this herder knows up to {known}")
            for number, migration in enumerate(schema.MIGRATIONS[version:], start=version + 1):
                try:
                    migration(self._db)
                except sqlite3.Error as exc:
                    raise StateError(f"{self.path}: migration to schema version {number} failed: {exc}") from exc
            if version < known:
                self._execute(f"PRAGMA user_version = {known}")

    @property
    def failure(self) -> StateError | None:
        """Why the last commit failed, while commits fail; None when they succeed."""
        with self._queue:
            return self._failure

    @property
    def transactions(self) -> Transactions:
        """The transactions so far (the agent's metrics read it)."""
        with self._queue:
            return self._transactions

    def _tally(self, started: float, committed: bool) -> None:
        """Count a transaction begun at ``started`` (``time.monotonic()``) that ended now."""
        elapsed = time.monotonic() - started
        with self._queue:
            done = self._transactions
            self._transactions = replace(done, committed=done.committed + committed,
                                         failed=done.failed + (not committed), seconds=done.seconds + elapsed)

    def close(self) -> None:
        """Commit what is pending and close the database; the store cannot be used afterwards.

        :raises StateError: writes could not be committed (they are lost).
        """
        with self._queue:
            self._closing = True
            self._queue.notify_all()
            committer = self._committer
        if committer is not None:
            committer.join()
        with self._lock:
            try:
                failure = self._commit_pending()
            finally:
                self._db.close()
        if failure is not None:
            raise StateError(f"{failure}: writes made since the last commit are lost")

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- transactions and statements ---------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Make the writes of the block one transaction: all are committed, or none.

        The writes made before it are committed first: if they cannot be, the
        block does not run (StateError). A nested block joins the outer one,
        which commits when it ends; if the nested block raises, its own writes
        are undone (it is a savepoint) and the exception goes on. Other
        threads wait until the outer block ends.
        """
        with self._lock:
            if self._depth:
                yield from self._savepoint()
                return
            failure = self._commit_pending()
        self._report()
        if failure is not None:
            raise StateError(str(failure))
        try:
            with self._lock:
                self._owner = threading.get_ident()
                try:
                    yield from self._block()
                finally:
                    self._owner = None
        finally:
            self._report()

    def _block(self) -> Iterator[None]:
        """The outer transaction of a block; a failed commit is the store's failure."""
        # IMMEDIATE takes the write lock now, while the busy timeout
        # applies: a transaction that reads first and then upgrades its
        # lock gets SQLITE_BUSY at once when another process wrote meanwhile.
        started = time.monotonic()
        try:
            self._execute("BEGIN IMMEDIATE")
        except StateError as exc:
            self._failed(exc)
            self._tally(started, committed=False)
            raise
        self._depth += 1
        committed = False
        try:
            yield
            self._execute("COMMIT")
            committed = True
        except BaseException as exc:
            self._rollback()
            if isinstance(exc, StateError) and _sqlite_failed(exc):
                self._failed(exc)
            raise
        else:
            self._succeeded()
        finally:
            self._depth -= 1
            self._tally(started, committed)

    def _savepoint(self) -> Iterator[None]:
        savepoint = f"nested_{self._depth}"
        self._execute(f"SAVEPOINT {savepoint}")
        self._depth += 1
        try:
            yield
            self._execute(f"RELEASE {savepoint}")
        except BaseException:
            # SQLite rolls back by itself on some errors (disk full, I/O):
            # then there is nothing left to roll back.
            if self._db.in_transaction:
                self._execute(f"ROLLBACK TO {savepoint}")
                self._execute(f"RELEASE {savepoint}")
            raise
        finally:
            self._depth -= 1

    def _rollback(self) -> None:
        # SQLite rolls back by itself on some errors (disk full, I/O): then
        # there is nothing left to roll back.
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error as exc:  # the connection is unusable: the next BEGIN says so
                log.warning("%s: rollback failed: %s", self.path, exc)

    # -- the group commit ---------------------------------------------------------------------

    def _write(self, apply: Callable[[], Any], *, wait: bool = True, retry: bool = True) -> Any:
        """Have ``apply`` (SQL statements) committed with the other pending writes.

        Inside this thread's :meth:`transaction` block it runs at once, as
        part of the block. ``wait``: return its result once committed (its
        exception if it raised). ``retry``: if its commit fails, keep it for
        the next one (else it is dropped and only its waiter knows).
        """
        if self._owner == threading.get_ident():
            with self.transaction():
                return apply()
        write = _Write(apply, retry=retry, waited=wait)
        with self._queue:
            if self._closing:
                raise StateError(f"{self.path}: the state database is closed")
            self._pending.append(write)
            if not wait:
                if len(self._pending) == 1:  # the committer sleeps until there is work
                    self._queue.notify()
                self._start_committer()
                if len(self._pending) < MAX_PENDING or self._failure is not None:
                    return None
                failure = None  # too many for the committer to keep up with: this writer commits them
            else:
                failure = self._failure if time.monotonic() < self._retry_at else None
            if failure is not None:
                if not retry:
                    self._pending.remove(write)
                self._start_committer()  # the retry is its job
        if failure is not None:  # no retry due: don't hold up the caller with a commit that fails
            raise StateError(str(failure))
        with self._lock:
            if not write.done.is_set():  # else a commit of another thread took it
                self._commit_pending()
        self._report()
        return write.outcome() if wait else None

    def _start_committer(self) -> None:
        """Start the thread that commits the writes nobody waits for (called with ``_queue`` held)."""
        if self._committer is None:
            self._committer = threading.Thread(target=self._commit_later, name="state-commit", daemon=True)
            self._committer.start()

    def _commit_later(self) -> None:
        """The committer's loop: the pending writes, :data:`GROUP_DELAY` after the first
        of them (or :data:`RETRY_INTERVAL` after a failed commit)."""
        while True:
            with self._queue:
                self._queue.wait_for(lambda: self._pending or self._closing)
                delay = GROUP_DELAY if self._failure is None else self._retry_at - time.monotonic()
                if delay > 0:
                    self._queue.wait_for(lambda: self._closing, delay)
                if self._closing:
                    return  # close() commits what is left
            with self._lock:
                self._commit_pending()
            self._report()

    def _commit_pending(self) -> StateError | None:
        """Commit every pending write in one transaction; why it failed, if it did.

        The caller holds the lock and calls :meth:`_report` once it let go of it.
        """
        with self._queue:
            batch, self._pending = self._pending, []
        if not batch:
            return None
        outcomes: list[tuple[Any, BaseException | None]] = []
        started = time.monotonic()
        try:
            self._execute("BEGIN IMMEDIATE")
            for write in batch:
                outcomes.append(self._apply(write))
            self._execute("COMMIT")
        except StateError as exc:
            self._rollback()
            self._tally(started, committed=False)
            kept = [write for write in batch if write.retry]
            with self._queue:
                self._pending[:0] = kept
            for write in batch:
                write.error = StateError(str(exc))
                write.done.set()
            self._failed(exc)
            return exc
        for write, (result, error) in zip(batch, outcomes, strict=True):
            write.result, write.error = result, error
            if error is not None and not write.waited:
                log.warning("%s: a write failed: %s", self.path, error)
            write.done.set()
        self._tally(started, committed=True)
        self._succeeded()
        return None

    def _apply(self, write: _Write) -> tuple[Any, BaseException | None]:
        """Run one write in a savepoint: what it returned, or what it raised (its
        statements undone). A failure of SQLite itself (disk full) is raised:
        the transaction fails."""
        self._execute("SAVEPOINT write")
        try:
            result = write.apply()
        except StateError as exc:
            if _sqlite_failed(exc) or not self._db.in_transaction:
                raise
            self._execute("ROLLBACK TO write")
            return None, exc
        except Exception as exc:  # the write's own error (KeyError...) goes to its waiter
            self._execute("ROLLBACK TO write")
            return None, exc
        else:
            return result, None
        finally:
            if self._db.in_transaction:
                self._execute("RELEASE write")

    def _failed(self, exc: StateError) -> None:
        with self._queue:
            self._failure = exc
            self._retry_at = time.monotonic() + RETRY_INTERVAL

    def _succeeded(self) -> None:
        with self._queue:
            self._failure = None

    def _report(self) -> None:
        """Tell ``on_failure`` or ``on_recovery`` that commits started failing or
        succeed again (called without the connection's lock)."""
        with self._report_lock:
            failure = self.failure
            if (failure is None) == (self._reported is None):
                return
            self._reported = failure
            if failure is not None:
                self._on_failure(failure)
            else:
                self._on_recovery()

    def _execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> sqlite3.Cursor:
        """Run one statement; the caller holds the lock (through transaction() for writes)."""
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from exc

    def _executemany(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        try:
            self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from exc

    def _query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Read, after committing the pending writes (unless commits fail: then
        what is committed is read)."""
        if self._pending and self._owner != threading.get_ident() and self.failure is None:
            with self._lock:
                self._commit_pending()
            self._report()
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StateError(f"{self.path}: {exc}") from exc

    def _exists(self, sql: str, params: Sequence[Any]) -> bool:
        with self._lock:
            return bool(self._execute(sql, params).fetchall())

    def _update(self, table: str, keys: Mapping[str, Any], changes: Mapping[str, Any], missing: str,
                wait: bool) -> None:
        """Set the columns ``changes`` names (checked names) in the row of
        ``table`` that ``keys`` selects; KeyError(missing) if there is none."""
        assignments = ", ".join(f'"{name}" = :{name}' for name in changes)
        # The key parameters are prefixed so that they never clash with a changed column.
        where = " AND ".join(f'"{name}" = :key_{name}' for name in keys)
        params = {**changes, **{f"key_{name}": value for name, value in keys.items()}}

        def apply() -> None:
            if self._execute(f"UPDATE {table} SET {assignments} WHERE {where}", params).rowcount == 0:
                raise KeyError(missing)

        self._write(apply, wait=wait)


    # -- jobs ---------------------------------------------------------------------------------

    def put_job(self, job: JobRecord) -> None:
        """Store a job submission, unless one with the same id is stored already."""
        params = _encode_job(job)
        self._write(lambda: self._execute(_insert("jobs", JobRecord) + " ON CONFLICT (id) DO NOTHING", params),
                    retry=False)

    def job(self, job_id: str) -> JobRecord | None:
        rows = self._query(f"SELECT {_columns(JobRecord)} FROM jobs WHERE id = ?", (job_id,))
        return _decode_job(rows[0]) if rows else None

    # -- parents: jobs registered, not run -----------------------------------------------------

    def put_parent(self, parent: ParentRecord) -> None:
        """Register ``parent``, replacing the job of that name (its ``last_launch`` stays
        when the new record has none: a resubmitted job does not launch a time again)."""
        params = _fields(parent)
        self._write(lambda: self._execute(
            _insert("parents", ParentRecord) + " ON CONFLICT (name) DO UPDATE SET source = excluded.source, "
            "text = excluded.text, status = excluded.status, registered_at = excluded.registered_at, "
            "last_launch = coalesce(excluded.last_launch, parents.last_launch)", params), retry=False)

    def parents(self) -> list[ParentRecord]:
        """Every registered job, by name."""
        rows = self._query(f"SELECT {_columns(ParentRecord)} FROM parents ORDER BY name")
        return [ParentRecord(**_decode(ParentRecord, row)) for row in rows]

    def update_parent(self, name: str, /, *, status: ParentStatus | None = None,
                      last_launch: float | None = None) -> None:
        """Change a registered job's status or latest launch; KeyError if it is not registered."""
        changes: dict[str, Any] = {}
        if status is not None:
            check_choice("status", status, ParentStatus)
            changes["status"] = status
        if last_launch is not None:
            changes["last_launch"] = last_launch
        if changes:
            self._update("parents", {"name": name}, changes, f"no registered job {name}", True)

    def delete_parent(self, name: str) -> None:
        """Forget a registered job (nothing if it is not registered); its children stay."""
        self._write(lambda: self._execute("DELETE FROM parents WHERE name = ?", (name,)))

    # -- allocations --------------------------------------------------------------------------

    def put_alloc(self, alloc: AllocRecord, tasks: Sequence[TaskRecord], ports: Sequence[PortRecord]) -> None:
        """Store an allocation with its tasks and ports, replacing what was
        stored for it before (its events stay).

        Raises KeyError if its job is not stored, ValueError if a task or a
        port belongs to another allocation.
        """
        others = ({task.alloc_id for task in tasks} | {port.alloc_id for port in ports}) - {alloc.id}
        if others:
            raise ValueError(f"tasks or ports of {', '.join(sorted(others))} given with alloc {alloc.id}")

        def apply() -> None:
            if not self._exists("SELECT 1 FROM jobs WHERE id = ?", (alloc.job_id,)):
                raise KeyError(f"no job {alloc.job_id}")
            updates = ", ".join(f'"{f.name}" = excluded."{f.name}"' for f in fields(AllocRecord) if f.name != "id")
            self._execute(_insert("allocs", AllocRecord) + f" ON CONFLICT (id) DO UPDATE SET {updates}",
                          _encode_alloc(alloc))
            self._execute("DELETE FROM tasks WHERE alloc_id = ?", (alloc.id,))
            self._execute("DELETE FROM ports WHERE alloc_id = ?", (alloc.id,))
            self._executemany(_insert("tasks", TaskRecord), map(_encode_task, tasks))
            self._executemany(_insert("ports", PortRecord), map(_fields, ports))

        self._write(apply, retry=False)

    def alloc(self, alloc_id: str) -> AllocRecord | None:
        rows = self._query(f"SELECT {_columns(AllocRecord)} FROM allocs WHERE id = ?", (alloc_id,))
        return _decode_alloc(rows[0]) if rows else None

    def allocs(self, *, job_name: str | None = None, live: bool | None = None,
               session: str | None = None) -> list[AllocRecord]:
        """The allocations, oldest first; ``live`` selects those pending or
        running (True) or the others (False)."""
        conditions = ["1"]
        params: list[Any] = []
        if job_name is not None:
            conditions.append("job_name = ?")
            params.append(job_name)
        if session is not None:
            conditions.append("session = ?")
            params.append(session)
        if live is not None:
            conditions.append(f"status {'' if live else 'NOT '}IN ({_LIVE})")
        rows = self._query(f"SELECT {_columns(AllocRecord)} FROM allocs WHERE {' AND '.join(conditions)} "
                           "ORDER BY created_at, rowid", params)
        return [_decode_alloc(row) for row in rows]

    def update_alloc(self, alloc_id: str, /, *, wait: bool = True, **changes: Any) -> None:
        """Change some of ``status``, ``desired``, ``session`` and ``keep``;
        ``updated_at`` becomes now. KeyError if the allocation is not stored
        (with ``wait``; else the commit that finds it out logs it)."""
        _check_names("update_alloc", changes, _ALLOC_UPDATABLE)
        if "status" in changes:
            check_choice("status", changes["status"], AllocStatus)
        if "desired" in changes:
            check_choice("desired", changes["desired"], DesiredStatus)
        self._update("allocs", {"id": alloc_id}, {**changes, "updated_at": time.time()}, f"no alloc {alloc_id}",
                     wait)

    def claim_alloc(self, alloc_id: str, *, owner: str, by: str, keep: bool) -> bool:
        """Make session ``by`` the owner of an allocation, if ``owner`` still is.

        Compare-and-set, so that of two herder processes taking over the
        allocations of a dead one, exactly one gets each allocation.
        """
        params = (by, int(keep), time.time(), alloc_id, owner)
        return bool(self._write(lambda: self._execute(
            "UPDATE allocs SET session = ?, keep = ?, updated_at = ? WHERE id = ? AND session = ?",
            params).rowcount == 1, retry=False))

    def delete_alloc(self, alloc_id: str) -> None:
        """Forget an allocation with its tasks, ports and events (nothing if it is not stored)."""
        self._write(lambda: self._execute("DELETE FROM allocs WHERE id = ?", (alloc_id,)))

    def forget_alloc(self, alloc_id: str) -> None:
        """Forget an allocation with its tasks, ports and events, and its job submission
        if no other allocation came from it (nothing if it is not stored): one write."""
        def apply() -> None:
            rows = self._execute("SELECT job_id FROM allocs WHERE id = ?", (alloc_id,)).fetchall()
            self._execute("DELETE FROM allocs WHERE id = ?", (alloc_id,))
            if rows:
                self._execute("DELETE FROM jobs WHERE id = ? AND NOT EXISTS "
                              "(SELECT 1 FROM allocs WHERE job_id = jobs.id)", (rows[0][0],))

        self._write(apply)

    # -- tasks --------------------------------------------------------------------------------

    def tasks(self, alloc_id: str) -> list[TaskRecord]:
        """The tasks of an allocation, in the order put_alloc was given them."""
        rows = self._query(f"SELECT {_columns(TaskRecord)} FROM tasks WHERE alloc_id = ? ORDER BY rowid",
                           (alloc_id,))
        return [_decode_task(row) for row in rows]

    def task(self, alloc_id: str, name: str) -> TaskRecord | None:
        rows = self._query(f"SELECT {_columns(TaskRecord)} FROM tasks WHERE alloc_id = ? AND name = ?",
                           (alloc_id, name))
        return _decode_task(rows[0]) if rows else None

    def update_task(self, alloc_id: str, name: str, /, *, wait: bool = True, **changes: Any) -> None:
        """Change fields of a task record. TypeError for a name that is not a
        changeable field, KeyError if the task is not stored (with ``wait``;
        else the commit that finds it out logs it)."""
        _check_names("update_task", changes, _TASK_UPDATABLE)
        if not changes:
            raise TypeError("update_task() needs a field to change")
        if "state" in changes:
            check_choice("state", changes["state"], TaskState)
        if "handle_state" in changes:
            changes["handle_state"] = _dump_optional(changes["handle_state"])
        if "created" in changes:
            changes["created"] = json.dumps(changes["created"])
        self._update("tasks", {"alloc_id": alloc_id, "name": name}, changes, f"no task {name} in alloc {alloc_id}",
                     wait)

    # -- ports --------------------------------------------------------------------------------

    def ports(self, alloc_id: str | None = None) -> list[PortRecord]:
        """The ports of an allocation; with no ``alloc_id``, those of every
        live allocation: what a restarted client must hold on to."""
        columns = _columns(PortRecord, table="ports")
        if alloc_id is None:
            rows = self._query(f"SELECT {columns} FROM ports JOIN allocs ON allocs.id = ports.alloc_id "
                               f"WHERE allocs.status IN ({_LIVE}) ORDER BY ports.rowid")
        else:
            rows = self._query(f"SELECT {columns} FROM ports WHERE alloc_id = ? ORDER BY rowid", (alloc_id,))
        return [PortRecord(**_decode(PortRecord, row)) for row in rows]

    def release_ports(self, alloc_id: str, *, wait: bool = True) -> None:
        """Forget the ports of an allocation."""
        self._write(lambda: self._execute("DELETE FROM ports WHERE alloc_id = ?", (alloc_id,)), wait=wait)

    # -- events -------------------------------------------------------------------------------

    def add_event(self, alloc_id: str, task: str, event: TaskEvent, *, wait: bool = True) -> None:
        """Append an event to a task's history, keeping its last :data:`EVENTS_KEPT`.

        Detail values that JSON cannot hold are stored as their ``str()``.
        KeyError if the allocation is not stored (with ``wait``; else the
        commit that finds it out logs it).
        """
        row = (alloc_id, task, event.type, event.time.isoformat(), event.message,
               json.dumps(event.details, default=str))

        def apply() -> None:
            if not self._exists("SELECT 1 FROM allocs WHERE id = ?", (alloc_id,)):
                raise KeyError(f"no alloc {alloc_id}")
            self._execute(
                "INSERT INTO events (alloc_id, task, type, time, message, details) VALUES (?, ?, ?, ?, ?, ?)", row)
            self._execute(
                """
                DELETE FROM events WHERE alloc_id = :alloc_id AND task = :task AND id <= (
                    SELECT id FROM events WHERE alloc_id = :alloc_id AND task = :task
                    ORDER BY id DESC LIMIT 1 OFFSET :kept)
                """,
                {"alloc_id": alloc_id, "task": task, "kept": EVENTS_KEPT})

        self._write(apply, wait=wait)

    def events(self, alloc_id: str, task: str | None = None, limit: int | None = None) -> list[tuple[str, TaskEvent]]:
        """The events of an allocation (of one task if ``task`` is given) as
        ``(task name, event)``, oldest first; ``limit`` keeps the latest ones."""
        where, params = ("alloc_id = ?", [alloc_id]) if task is None else \
            ("alloc_id = ? AND task = ?", [alloc_id, task])
        rows = self._query(f"SELECT task, type, time, message, details FROM events WHERE {where} "
                           "ORDER BY id DESC LIMIT ?", [*params, -1 if limit is None else limit])
        return [(task_name, TaskEvent(type=type_, message=message, details=json.loads(details),
                                      time=datetime.fromisoformat(time_)))
                for task_name, type_, time_, message, details in reversed(rows)]

    # -- deferred work ------------------------------------------------------------------------

    def defer(self, work: Deferred, *, wait: bool = True) -> None:
        """Record work to do later; it replaces work of the same kind and key."""
        params = _encode_deferred(work)
        self._write(lambda: self._execute(
            _insert("deferred", Deferred)
            + " ON CONFLICT (kind, key) DO UPDATE SET payload = excluded.payload, due = excluded.due", params),
            wait=wait)

    def deferred(self, kind: str | None = None) -> list[Deferred]:
        """The deferred work (of one kind if given), soonest first."""
        where, params = ("1", ()) if kind is None else ("kind = ?", (kind,))
        rows = self._query(f"SELECT {_columns(Deferred)} FROM deferred WHERE {where} ORDER BY due, kind, key",
                           params)
        return [_decode_deferred(row) for row in rows]

    def due(self, now: float) -> list[Deferred]:
        """The deferred work due at ``now`` (epoch seconds), soonest first."""
        rows = self._query(f"SELECT {_columns(Deferred)} FROM deferred WHERE due <= ? ORDER BY due, kind, key",
                           (now,))
        return [_decode_deferred(row) for row in rows]

    def done(self, kind: str, key: str, *, wait: bool = True) -> None:
        """Forget deferred work once it is done (nothing if it is not stored)."""
        self._write(lambda: self._execute("DELETE FROM deferred WHERE kind = ? AND key = ?", (kind, key)),
                    wait=wait)

    # -- checks -------------------------------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """What is wrong with the database file; an empty list when nothing is."""
        problems = [row[0] for row in self._query("PRAGMA integrity_check") if row[0] != "ok"]
        problems += [f"row {rowid} of {table} refers to a missing row of {parent}"
                     for table, rowid, parent, _ in self._query("PRAGMA foreign_key_check")]
        return problems


def _sqlite_failed(exc: StateError) -> bool:
    """Whether SQLite failed to do its work (disk full, I/O error, locked too
    long), rather than refusing a statement (a constraint) or herder refusing
    the database."""
    return isinstance(exc.__cause__, sqlite3.OperationalError)


# -- rows <-> records -------------------------------------------------------------------------
# A record's fields are its table's columns, by name and in order ("index"
# and "to" are SQL keywords, hence the quotes).

def _columns(record_type: type, table: str | None = None) -> str:
    prefix = f"{table}." if table else ""
    return ", ".join(f'{prefix}"{f.name}"' for f in fields(record_type))


def _insert(table: str, record_type: type) -> str:
    """An INSERT of a record given as named parameters."""
    values = ", ".join(f":{f.name}" for f in fields(record_type))
    return f"INSERT INTO {table} ({_columns(record_type)}) VALUES ({values})"


def _fields(record: Any) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _decode(record_type: type, row: tuple[Any, ...]) -> dict[str, Any]:
    """A row selected with ``_columns(record_type)``, as the record's keyword arguments."""
    return {f.name: value for f, value in zip(fields(record_type), row, strict=True)}


def _check_names(method: str, changes: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(changes.keys() - allowed)
    if unknown:
        raise TypeError(f"{method}() cannot change {', '.join(unknown)}; it changes {', '.join(sorted(allowed))}")


def _dump_optional(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _encode_job(job: JobRecord) -> dict[str, Any]:
    return {**_fields(job), "variables": json.dumps(job.variables)}


def _decode_job(row: tuple[Any, ...]) -> JobRecord:
    values = _decode(JobRecord, row)
    return JobRecord(**{**values, "variables": json.loads(values["variables"])})


def _encode_alloc(alloc: AllocRecord) -> dict[str, Any]:
    return {**_fields(alloc), "dir": str(alloc.dir)}


def _decode_alloc(row: tuple[Any, ...]) -> AllocRecord:
    values = _decode(AllocRecord, row)
    return AllocRecord(**{**values, "dir": Path(values["dir"]), "keep": bool(values["keep"])})


def _encode_task(task: TaskRecord) -> dict[str, Any]:
    return {**_fields(task), "handle_state": _dump_optional(task.handle_state), "created": json.dumps(task.created)}


def _decode_task(row: tuple[Any, ...]) -> TaskRecord:
    values = _decode(TaskRecord, row)
    handle_state = values["handle_state"]
    return TaskRecord(**{**values, "failed": bool(values["failed"]),
                         "handle_state": None if handle_state is None else json.loads(handle_state),
                         "created": [(kind, value) for kind, value in json.loads(values["created"])]})


def _encode_deferred(work: Deferred) -> dict[str, Any]:
    return {**_fields(work), "payload": json.dumps(work.payload)}


def _decode_deferred(row: tuple[Any, ...]) -> Deferred:
    values = _decode(Deferred, row)
    return Deferred(**{**values, "payload": json.loads(values["payload"])})


def _make_private(path: Path) -> None:
    """Create the database file 0600, or make an existing one (and its WAL files) 0600.

    SQLite creates ``-wal`` and ``-shm`` with the database file's mode, so a
    private database file keeps them private too; those an earlier version
    left readable are fixed here. No link is followed.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    for name, create in ((str(path), os.O_CREAT), (f"{path}-wal", 0), (f"{path}-shm", 0)):
        try:
            fd = os.open(name, flags | create, 0o600)
        except FileNotFoundError:
            continue
        try:
            info = os.fstat(fd)
            if info.st_mode & 0o7777 != 0o600 and info.st_uid == os.geteuid():  # another's: theirs to fix
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
