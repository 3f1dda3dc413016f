"""A second process writing to a state database, for the state tests.

``python -m tests.core.state.writer churn DB SEED`` writes what a client
writes, as fast as it can, until it is killed: allocations of three tasks
with their ports, restarts with their events, status changes, deferred work,
deletions.

``python -m tests.core.state.writer burst DB PREFIX COUNT`` runs
:func:`write_allocs` and exits.

``python -m tests.core.state.writer ordered DB`` runs :func:`ordered` until
it is killed.

Both print ``writing`` when they start to write (``ordered`` once its first writes are committed).

:func:`start` runs it from a test.
"""

from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from herder.objects import TaskEvent
from herder.state import Deferred, JobRecord, Store
from tests.core.state.factory import TASK_NAMES, make_alloc, make_job, stored_task

REPO = Path(__file__).resolve().parents[3]

ORDERED = "ordered"
"""The allocation :func:`ordered` writes."""

ALLOCS_KEPT = 5
"""Churn deletes all but its last few allocations, so the kill can land in a delete too."""


def churn(store: Store, job: JobRecord, seed: int) -> None:
    rng = random.Random(seed)
    session = f"writer-{os.getpid()}"
    for number in itertools.count():
        alloc_id = f"{session}-{number}"
        store.put_alloc(*make_alloc(alloc_id, job, index=number, session=session, port_base=20000 + 4 * number))
        store.update_alloc(alloc_id, status="running")
        for _ in range(rng.randint(1, 4)):
            task = rng.choice(TASK_NAMES)
            with store.transaction():
                record = stored_task(store, alloc_id, task)
                store.update_task(alloc_id, task, state="running", restarts=record.restarts + 1,
                                  restart_count=record.restart_count + 1, restart_window_start=time.time(),
                                  handle_state={"pid": rng.randint(2, 1 << 22)})
                store.add_event(alloc_id, task, TaskEvent(type="Restarting", message="Task restarting in 1s",
                                                          details={"restart_delay": 1.0}))
        store.defer(Deferred(kind="image", key=alloc_id, payload={"image": "busybox:1"}, due=time.time() + 180))
        store.update_alloc(alloc_id, status=rng.choice(["complete", "failed", "stopped"]), desired="stop")
        store.done("image", alloc_id)
        store.delete_alloc(f"{session}-{number - ALLOCS_KEPT}")


def write_allocs(store: Store, job: JobRecord, prefix: str, count: int) -> None:
    """Store allocations PREFIX-0, PREFIX-1..., each running with one restart of its ``web`` task."""
    for number in range(count):
        alloc_id = f"{prefix}-{number}"
        store.put_alloc(*make_alloc(alloc_id, job, index=number, session=prefix))
        with store.transaction():
            restarts = stored_task(store, alloc_id, "web").restarts
            store.update_task(alloc_id, "web", restarts=restarts + 1)
            store.add_event(alloc_id, "web", TaskEvent(type="Restarting"))
        store.update_alloc(alloc_id, status="running")


def ordered(store: Store, job: JobRecord) -> None:
    """Updates nobody waits for, as runners make them: the ``web`` then the
    ``worker`` task of one allocation counted up in turn, from where the last
    writer left them. A database with a write but not one made before it
    shows as ``worker`` ahead of ``web``, or ``web`` more than one ahead."""
    if store.alloc(ORDERED) is None:
        store.put_alloc(*make_alloc(ORDERED, job))
    first = stored_task(store, ORDERED, "web").restarts + 1
    store.update_task(ORDERED, "web", wait=False, restarts=first)
    # Waited for: every writer leaves progress, however soon the kill comes on a loaded machine.
    store.update_task(ORDERED, "worker", restarts=first)
    print("writing", flush=True)
    for count in itertools.count(first + 1):
        store.update_task(ORDERED, "web", wait=False, restarts=count)
        store.update_task(ORDERED, "worker", wait=False, restarts=count)


def start(*args: str) -> subprocess.Popen[bytes]:
    """Run this module in a new process with ``args``; its stdout is a pipe.

    Use it in a ``with`` block that kills it at the end: leaving the block
    waits for the process.
    """
    return subprocess.Popen([sys.executable, "-m", __name__, *args], cwd=REPO, stdout=subprocess.PIPE)


def main(argv: list[str]) -> None:
    mode, path, *args = argv
    with Store(Path(path)) as store:
        job = make_job()
        store.put_job(job)
        if mode == "ordered":
            ordered(store, job)  # says "writing" itself, once its first writes are committed
            return
        print("writing", flush=True)
        if mode == "churn":
            churn(store, job, int(args[0]))
        else:
            write_allocs(store, job, args[0], int(args[1]))


if __name__ == "__main__":
    main(sys.argv[1:])
