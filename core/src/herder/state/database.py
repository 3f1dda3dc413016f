"""The state database's commit engine: one SQLite connection, its group commit and its transactions.

It knows SQL and transactions, not records: the tables' own statements are in
:mod:`herder.state.tables`, and :class:`~herder.state.store.Store` puts the two together.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from herder.errors import HerderError
from herder.state import schema

log = logging.getLogger(__name__)

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


class StateError(HerderError):
    """The state database cannot be used: it is corrupt, not herder's, newer
    than this herder, or SQLite failed (disk full, locked too long...)."""


@dataclass(frozen=True)
class Transactions:
    """The database's transactions since it was opened (group commits and :meth:`Database.transaction`
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


class Database:
    """The SQLite database at ``path`` (created if missing, migrated to this
    herder's schema), and the writes on their way to it.

    A write is a function of SQL statements given to :meth:`write`. It is
    atomic, and the writes of a few milliseconds are committed together, in
    the order they were made (a group commit): the writes of every runner in
    one transaction rather than one transaction each. A write either waits
    for its commit (the default), or with ``wait=False`` returns at once and
    is committed within :data:`GROUP_DELAY` seconds, or by the next write
    that waits or the next read (or by itself, when :data:`MAX_PENDING`
    writes are already pending). :meth:`transaction` makes several writes
    one. A commit is atomic: a process killed at any instant leaves the
    database as of its last commit, never half of a write, and never a write
    without the ones made before it. The journal is a write-ahead log synced
    at checkpoints only (``synchronous = NORMAL``), so a power loss or an OS
    crash may lose the last few commits, but still never half of one.

    When a commit fails (a full disk, say), the writes made with ``retry``
    (those that only change records: updates, events, ports released,
    deferred work) are kept and committed with the next commit, tried again
    every :data:`RETRY_INTERVAL` seconds; the others (those that create
    records or decide something: ``put_job``, ``put_alloc``,
    ``claim_alloc``) and :meth:`transaction` blocks fail and are undone.
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
            self.execute("PRAGMA synchronous = NORMAL")
            self.execute("PRAGMA foreign_keys = ON")
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
            version = self.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                if self.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StateError(f"{self.path} is not a herder state database (it has tables "
                                     "but no schema version)")
            elif self.execute("PRAGMA application_id").fetchone()[0] != schema.APPLICATION_ID:
                raise StateError(f"{self.path} is not a herder state database")
            if version > known:
                raise StateError(f"{self.path} has schema version {version}, this herder knows up to {known}")
            for number, migration in enumerate(schema.MIGRATIONS[version:], start=version + 1):
                try:
                    migration(self._db)
                except sqlite3.Error as exc:
                    raise StateError(f"{self.path}: migration to schema version {number} failed: {exc}") from exc
            if version < known:
                self.execute(f"PRAGMA user_version = {known}")

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

    def __enter__(self) -> Database:
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
            self.execute("BEGIN IMMEDIATE")
        except StateError as exc:
            self._failed(exc)
            self._tally(started, committed=False)
            raise
        self._depth += 1
        committed = False
        try:
            yield
            self.execute("COMMIT")
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
        self.execute(f"SAVEPOINT {savepoint}")
        self._depth += 1
        try:
            yield
            self.execute(f"RELEASE {savepoint}")
        except BaseException:
            # SQLite rolls back by itself on some errors (disk full, I/O):
            # then there is nothing left to roll back.
            if self._db.in_transaction:
                self.execute(f"ROLLBACK TO {savepoint}")
                self.execute(f"RELEASE {savepoint}")
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

    def write(self, apply: Callable[[], Any], *, wait: bool = True, retry: bool = True) -> Any:
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
            self.execute("BEGIN IMMEDIATE")
            for write in batch:
                outcomes.append(self._apply(write))
            self.execute("COMMIT")
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
        self.execute("SAVEPOINT write")
        try:
            result = write.apply()
        except StateError as exc:
            if _sqlite_failed(exc) or not self._db.in_transaction:
                raise
            self.execute("ROLLBACK TO write")
            return None, exc
        except Exception as exc:  # the write's own error (KeyError...) goes to its waiter
            self.execute("ROLLBACK TO write")
            return None, exc
        else:
            return result, None
        finally:
            if self._db.in_transaction:
                self.execute("RELEASE write")

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

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> sqlite3.Cursor:
        """Run one statement; the caller holds the lock (a write's function, run by its commit, does; so
        does a :meth:`transaction` block)."""
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from exc

    def executemany(self, sql: str, rows: Iterable[Mapping[str, Any]]) -> None:
        """Run one statement for each of ``rows``, as :meth:`execute`."""
        try:
            self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise StateError(f"{self.path}: {exc}") from exc

    def query(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> list[tuple[Any, ...]]:
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

    def exists(self, sql: str, params: Sequence[Any]) -> bool:
        """Whether ``sql`` selects a row, in a write (what its transaction sees so far)."""
        with self._lock:
            return bool(self.execute(sql, params).fetchall())

    # -- checks -------------------------------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """What is wrong with the database file; an empty list when nothing is."""
        problems = [row[0] for row in self.query("PRAGMA integrity_check") if row[0] != "ok"]
        problems += [f"row {rowid} of {table} refers to a missing row of {parent}"
                     for table, rowid, parent, _ in self.query("PRAGMA foreign_key_check")]
        return problems


def _sqlite_failed(exc: StateError) -> bool:
    """Whether SQLite failed to do its work (disk full, I/O error, locked too
    long), rather than refusing a statement (a constraint) or herder refusing
    the database."""
    return isinstance(exc.__cause__, sqlite3.OperationalError)


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
