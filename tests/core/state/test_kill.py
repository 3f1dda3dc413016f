"""A writer killed at random instants leaves a consistent database."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

from herder.state import Store
from tests.core.state import writer
from tests.core.state.factory import TASK_NAMES, stored_task

KILLS = 30
MAX_DELAY = 0.05
"""Longest time the writer writes before it is killed: thousands of transactions."""


def assert_consistent(store: Store, context: str) -> int:
    """Check what each transaction of the writer keeps together; return how many allocations there are."""
    assert store.integrity_check() == [], context
    allocs = store.allocs()
    for alloc in allocs:
        tasks = store.tasks(alloc.id)
        assert [task.name for task in tasks] == list(TASK_NAMES), context
        owners = sorted((port.owner, port.label) for port in store.ports(alloc.id))
        assert owners == sorted([("", "http")] + [(name, "metrics") for name in TASK_NAMES]), context
        for task in tasks:
            restarting = [event for _, event in store.events(alloc.id, task.name) if event.type == "Restarting"]
            assert task.restarts == len(restarting), f"{context}: {alloc.id} {task.name}"
    return len(allocs)


def test_a_killed_writer_leaves_a_consistent_database(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "state.db"
    rng = random.Random(seed)
    allocs_seen = 0
    # The same file all along: each writer starts from what the last one's kill left.
    for kill in range(KILLS):
        context = f"HERDER_TEST_SEED={seed}, kill {kill}"
        write_until_killed(rng, context, "churn", str(path), str(rng.randrange(1 << 32)))
        with Store(path) as store:
            allocs_seen += assert_consistent(store, context)
    assert allocs_seen > KILLS, f"HERDER_TEST_SEED={seed}: the writers hardly wrote anything"


def test_a_writer_killed_amid_writes_nobody_waits_for_loses_none_made_before_a_committed_one(
        tmp_path: Path, seed: int) -> None:
    path = tmp_path / "state.db"
    rng = random.Random(seed)
    web = 0
    for kill in range(KILLS):
        context = f"HERDER_TEST_SEED={seed}, kill {kill}"
        write_until_killed(rng, context, "ordered", str(path))
        with Store(path) as store:
            assert store.integrity_check() == [], context
            web, worker = (stored_task(store, writer.ORDERED, name).restarts for name in ("web", "worker"))
            assert web - worker in (0, 1), f"{context}: web {web}, worker {worker}"
    assert web > KILLS, f"HERDER_TEST_SEED={seed}: the writers hardly wrote anything"


def write_until_killed(rng: random.Random, context: str, *args: str) -> None:
    """Run the writer with ``args`` and kill it with SIGKILL a random moment after it starts writing."""
    with writer.start(*args) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == b"writing\n", context
            time.sleep(rng.uniform(0, MAX_DELAY))  # deliberate sleep: the kill at a random instant is the subject
            child.send_signal(signal.SIGKILL)
            # Killed, not dead of an error of its own before the kill.
            assert child.wait(30) == -signal.SIGKILL, context
        finally:
            child.kill()
