"""The client's durable state: one SQLite database, ``<data_dir>/state.db``."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType

from herder.state.database import Database, StateError, Transactions
from herder.state.tables.allocs import Allocs
from herder.state.tables.deferred import DeferredWork
from herder.state.tables.events import Events
from herder.state.tables.jobs import Jobs, Parents
from herder.state.tables.networks import Networks
from herder.state.tables.ports import Ports
from herder.state.tables.previous import Previous
from herder.state.tables.tasks import Tasks
from herder.state.tables.versions import Deployments, Versions


class Store(Jobs, Parents, Versions, Deployments, Allocs, Tasks, Ports, Events, DeferredWork, Previous, Networks):
    """The client's state: jobs, their versions and deployments, allocations, task states, ports,
    events, deferred work, what each allocation replaces and the allocations' network namespaces,
    in the SQLite database at ``path``
    (created if missing).

    Each family's methods are its table's (:mod:`herder.state.tables`); every
    one of them goes through the commit engine, :class:`~herder.state.database.Database`,
    which says what a write is: atomic, committed with the others of its moment
    (a group commit), waited for unless ``wait=False``, kept for the next
    commit or undone when a commit fails (``on_failure``, ``on_recovery``).
    Any SQLite failure is raised as :class:`StateError`.
    """

    def __init__(self, path: Path, *, on_failure: Callable[[StateError], None] | None = None,
                 on_recovery: Callable[[], None] | None = None) -> None:
        super().__init__(Database(path, on_failure=on_failure, on_recovery=on_recovery))
        self.path = path

    @property
    def failure(self) -> StateError | None:
        """Why the last commit failed, while commits fail; None when they succeed."""
        return self._db.failure

    @property
    def transactions(self) -> Transactions:
        """The transactions so far (the agent's metrics read it)."""
        return self._db.transactions

    def transaction(self) -> AbstractContextManager[None]:
        """Make the writes of the block one transaction: all are committed, or none
        (:meth:`Database.transaction <herder.state.database.Database.transaction>`)."""
        return self._db.transaction()

    def integrity_check(self) -> list[str]:
        """What is wrong with the database file; an empty list when nothing is."""
        return self._db.integrity_check()

    def close(self) -> None:
        """Commit what is pending and close the database; the store cannot be used afterwards.

        :raises StateError: writes could not be committed (they are lost).
        """
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
