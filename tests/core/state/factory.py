"""Records for the state tests: a job, and allocations of three tasks with their ports."""

from __future__ import annotations

import time
from pathlib import Path

from herder.state import AllocRecord, JobRecord, PortRecord, Store, TaskRecord, job_id

TASK_NAMES = ("web", "worker", "sidecar")

JOB_TEXT = 'job "shop" {\n  group "web" {\n    task "web" {\n      driver = "raw_exec"\n    }\n  }\n}\n'


def make_job(text: str = JOB_TEXT, variables: dict[str, str] | None = None) -> JobRecord:
    variables = variables or {}
    return JobRecord(id=job_id("hcl", text, variables), name="shop", source="jobs/shop.hcl", format="hcl",
                     text=text, variables=variables, created_at=time.time())


def make_alloc(alloc_id: str, job: JobRecord, *, index: int = 0, session: str = "session-1",
               job_name: str = "shop", port_base: int = 20000,
               ) -> tuple[AllocRecord, list[TaskRecord], list[PortRecord]]:
    """An allocation of :data:`TASK_NAMES`: a shared ``http`` port and one
    ``metrics`` port per task; what ``Store.put_alloc`` takes."""
    now = time.time()
    alloc = AllocRecord(id=alloc_id, job_id=job.id, name=f"{job_name}.web[{index}]", index=index,
                        job_name=job_name, group_name="web", dir=Path("/data/alloc") / alloc_id,
                        session=session, created_at=now, updated_at=now)
    tasks = [TaskRecord(alloc_id=alloc_id, name=name, driver="raw_exec") for name in TASK_NAMES]
    ports = [PortRecord(alloc_id=alloc_id, owner="", label="http", value=port_base, to=8080)]
    ports += [PortRecord(alloc_id=alloc_id, owner=name, label="metrics", value=port_base + 1 + number)
              for number, name in enumerate(TASK_NAMES)]
    return alloc, tasks, ports


def stored_task(store: Store, alloc_id: str, name: str) -> TaskRecord:
    """The stored task, which must be there."""
    task = store.task(alloc_id, name)
    assert task is not None, f"no task {name} in alloc {alloc_id}"
    return task
