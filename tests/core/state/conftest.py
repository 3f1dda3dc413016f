"""Fixtures of the state tests: a store in a temporary directory, and a job stored in it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.state import JobRecord, Store
from tests.core.state.factory import make_job


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(tmp_path / "state.db") as store:
        yield store


@pytest.fixture
def job(store: Store) -> JobRecord:
    """A job, already stored."""
    job = make_job()
    store.put_job(job)
    return job
