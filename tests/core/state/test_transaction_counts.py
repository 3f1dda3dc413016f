"""Store.transactions: what the agent's metrics say of the state database."""

from __future__ import annotations

import pytest

from herder.state import AllocRecord, JobRecord, Store
from tests.core.state.factory import make_alloc


class Boom(Exception):
    pass


def test_commits_and_failures_are_counted_with_their_time(store: Store, job: JobRecord) -> None:
    before = store.transactions  # the schema's, and the job's
    assert before.committed >= 1 and before.failed == 0 and before.seconds > 0

    store.put_alloc(*make_alloc("a1", job))  # a group commit
    with store.transaction():  # a block: one transaction for both
        store.put_alloc(*make_alloc("a2", job))
        store.update_alloc("a2", status="running")
    with pytest.raises(Boom), store.transaction():
        store.put_alloc(*make_alloc("a3", job))
        raise Boom

    after = store.transactions
    assert (after.committed - before.committed, after.failed - before.failed) == (2, 1)
    assert after.seconds > before.seconds
    assert [a.id for a in store.allocs()] == ["a1", "a2"]
    assert isinstance(store.alloc("a2"), AllocRecord)
