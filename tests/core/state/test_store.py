"""The records the store keeps, and what each method does with them."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from herder.objects import TaskEvent
from herder.state import (
    EVENTS_KEPT,
    AllocStatus,
    Deferred,
    JobRecord,
    ParentRecord,
    PortRecord,
    StateError,
    Store,
    TaskRecord,
    job_id,
)
from tests.core.state.factory import JOB_TEXT, TASK_NAMES, make_alloc, make_job


def test_job_round_trip(store: Store) -> None:
    job = make_job(variables={"region": "eu", "count": "3"})
    store.put_job(job)
    assert store.job(job.id) == job
    assert store.job("nope") is None


def test_put_job_keeps_the_first_submission(store: Store, job: JobRecord) -> None:
    store.put_job(replace(job, source="api", created_at=job.created_at + 60))
    assert store.job(job.id) == job


def test_job_id_hashes_format_text_and_variables() -> None:
    assert job_id("hcl", "text", {"a": "1", "b": "2"}) == job_id("hcl", "text", {"b": "2", "a": "1"})
    assert len({job_id("hcl", "text", {}), job_id("json", "text", {}), job_id("hcl", "text2", {}),
                job_id("hcl", "text", {"a": "1"})}) == 4


def test_alloc_round_trip(store: Store, job: JobRecord) -> None:
    alloc, tasks, ports = make_alloc("a1", job)
    alloc = replace(alloc, keep=True, status="running", desired="stop")
    tasks[0] = replace(tasks[0], state="dead", failed=True, restarts=4, exit_code=137,
                       handle_state={"pid": 42, "nested": {"argv": ["sleep", "1"]}},
                       created=[("container", "c1"), ("image", "busybox:1")], restart_count=2,
                       restart_window_start=1700000000.5, started_at=1700000001.25, finished_at=1700000002.0)
    store.put_alloc(alloc, tasks, ports)

    assert store.alloc("a1") == alloc
    assert store.alloc("nope") is None
    assert store.tasks("a1") == tasks
    assert store.task("a1", "web") == tasks[0]
    assert store.task("a1", "nope") is None
    assert store.ports("a1") == ports


def test_tasks_keep_the_order_they_were_given(store: Store, job: JobRecord) -> None:
    alloc, tasks, ports = make_alloc("a1", job)
    store.put_alloc(alloc, tasks[::-1], ports)
    assert [task.name for task in store.tasks("a1")] == list(TASK_NAMES[::-1])


def test_put_alloc_replaces_tasks_and_ports_and_keeps_events(store: Store, job: JobRecord) -> None:
    alloc, tasks, ports = make_alloc("a1", job)
    store.put_alloc(alloc, tasks, ports)
    store.add_event("a1", "web", TaskEvent(type="Received"))

    renamed = replace(alloc, name="shop.web[7]", index=7)
    store.put_alloc(renamed, tasks[:1], ports[:1])

    assert store.alloc("a1") == renamed
    assert store.tasks("a1") == tasks[:1]
    assert store.ports("a1") == ports[:1]
    assert [event.type for _, event in store.events("a1")] == ["Received"]


def test_put_alloc_needs_its_job(store: Store) -> None:
    alloc, tasks, ports = make_alloc("a1", make_job())
    with pytest.raises(KeyError, match="no job"):
        store.put_alloc(alloc, tasks, ports)
    assert store.alloc("a1") is None


def test_put_alloc_refuses_records_of_another_alloc(store: Store, job: JobRecord) -> None:
    alloc, tasks, ports = make_alloc("a1", job)
    with pytest.raises(ValueError, match="a2"):
        store.put_alloc(alloc, [*tasks, replace(tasks[0], alloc_id="a2")], ports)


def test_put_alloc_is_one_transaction(store: Store, job: JobRecord) -> None:
    alloc, tasks, ports = make_alloc("a1", job)
    with pytest.raises(StateError, match="UNIQUE"):
        store.put_alloc(alloc, tasks, [*ports, ports[0]])  # the last port fails, after the rest was written
    assert store.alloc("a1") is None
    assert store.tasks("a1") == []
    assert store.ports("a1") == []


def test_records_check_their_enumerations(job: JobRecord) -> None:
    alloc, tasks, _ = make_alloc("a1", job)
    # What the type checker refuses, a record refuses at run time too.
    with pytest.raises(ValueError, match="status"):
        replace(alloc, status="lost")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="desired"):
        replace(alloc, desired="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="state"):
        replace(tasks[0], state="asleep")  # type: ignore[arg-type]


def test_allocs_filters(store: Store, job: JobRecord) -> None:
    placed: list[tuple[str, str, str, AllocStatus]] = [
        ("a1", "shop", "s1", "running"), ("a2", "shop", "s2", "complete"),
        ("a3", "blog", "s1", "pending"), ("a4", "blog", "s2", "failed")]
    for alloc_id, job_name, session, status in placed:
        alloc, tasks, ports = make_alloc(alloc_id, job, job_name=job_name, session=session)
        store.put_alloc(replace(alloc, status=status), tasks, ports)

    def ids(**filters: Any) -> list[str]:
        return [alloc.id for alloc in store.allocs(**filters)]

    assert ids() == ["a1", "a2", "a3", "a4"]
    assert ids(job_name="shop") == ["a1", "a2"]
    assert ids(session="s1") == ["a1", "a3"]
    assert ids(live=True) == ["a1", "a3"]
    assert ids(live=False) == ["a2", "a4"]
    assert ids(job_name="blog", live=False, session="s2") == ["a4"]


def test_update_alloc(store: Store, job: JobRecord) -> None:
    alloc, tasks, ports = make_alloc("a1", job)
    alloc = replace(alloc, created_at=1.0, updated_at=1.0)
    store.put_alloc(alloc, tasks, ports)
    before = time.time()
    store.update_alloc("a1", status="stopped", desired="stop", session="s9", keep=True)
    updated = store.alloc("a1")
    assert updated is not None
    assert updated.updated_at >= before
    assert updated == replace(alloc, status="stopped", desired="stop", session="s9", keep=True,
                              updated_at=updated.updated_at)


def test_claim_alloc_succeeds_only_for_the_owner_it_expects(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job, session="dead"))
    assert store.claim_alloc("a1", owner="dead", by="first", keep=True)
    # a second herder that read the same old owner loses the race
    assert not store.claim_alloc("a1", owner="dead", by="second", keep=False)
    claimed = store.alloc("a1")
    assert claimed is not None and (claimed.session, claimed.keep) == ("first", True)


def test_update_alloc_refuses_what_it_cannot_change(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    with pytest.raises(TypeError, match="job_name"):
        store.update_alloc("a1", job_name="other")
    with pytest.raises(ValueError, match="status"):
        store.update_alloc("a1", status="lost")
    with pytest.raises(KeyError, match="nope"):
        store.update_alloc("nope", status="running")


def test_update_task(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    store.update_task("a1", "worker", state="running", restarts=2, restart_count=1, restart_window_start=10.5,
                      handle_state={"pid": 7}, created=[("image", "busybox")], started_at=11.0)
    assert store.task("a1", "worker") == TaskRecord(
        alloc_id="a1", name="worker", driver="raw_exec", state="running", restarts=2, restart_count=1,
        restart_window_start=10.5, handle_state={"pid": 7}, created=[("image", "busybox")], started_at=11.0)
    store.update_task("a1", "worker", handle_state=None, exit_code=0)
    task = store.task("a1", "worker")
    assert task is not None
    assert (task.handle_state, task.exit_code) == (None, 0)
    assert store.task("a1", "web") == TaskRecord(alloc_id="a1", name="web", driver="raw_exec")


def test_update_task_refuses_what_it_cannot_change(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    with pytest.raises(TypeError, match="restrats"):
        store.update_task("a1", "web", restrats=1)
    with pytest.raises(TypeError, match="alloc_id"):
        store.update_task("a1", "web", alloc_id="a2")
    with pytest.raises(TypeError):
        store.update_task("a1", "web")
    with pytest.raises(ValueError, match="state"):
        store.update_task("a1", "web", state="asleep")
    with pytest.raises(KeyError, match="nope"):
        store.update_task("a1", "nope", restarts=1)


def test_ports_of_live_allocs(store: Store, job: JobRecord) -> None:
    expected: list[PortRecord] = []
    statuses: list[AllocStatus] = ["pending", "running", "complete", "failed", "stopped"]
    for number, status in enumerate(statuses):
        alloc, tasks, ports = make_alloc(f"a{number}", job, port_base=20000 + 10 * number)
        store.put_alloc(replace(alloc, status=status), tasks, ports)
        if status in ("pending", "running"):
            expected += ports
    assert store.ports() == expected

    store.release_ports("a0")
    assert store.ports("a0") == []
    assert store.ports() == expected[4:]


def test_delete_alloc_cascades(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    store.put_alloc(*make_alloc("a2", job))
    store.add_event("a1", "web", TaskEvent(type="Received"))
    store.add_event("a2", "web", TaskEvent(type="Received"))

    store.delete_alloc("a1")
    store.delete_alloc("a1")  # already gone: nothing to do

    assert store.alloc("a1") is None
    assert store.tasks("a1") == []
    assert store.ports("a1") == []
    assert store.events("a1") == []
    assert len(store.tasks("a2")) == 3
    assert len(store.events("a2")) == 1
    assert store.integrity_check() == []


def test_forget_alloc_drops_its_job_with_its_last_allocation(store: Store, job: JobRecord) -> None:
    other = make_job(JOB_TEXT + "# another\n")
    store.put_job(other)
    store.put_alloc(*make_alloc("a1", job))
    store.put_alloc(*make_alloc("a2", job))
    store.put_alloc(*make_alloc("b1", other))
    store.add_event("a1", "web", TaskEvent(type="Received"))

    store.forget_alloc("a1")
    assert store.alloc("a1") is None and store.events("a1") == []
    assert store.job(job.id) is not None  # a2 still came from it
    store.forget_alloc("a2")
    store.forget_alloc("a2")  # already gone: nothing to do
    assert store.job(job.id) is None
    assert store.job(other.id) is not None and store.alloc("b1") is not None
    assert store.integrity_check() == []


def test_event_round_trip(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    received = TaskEvent(type="Received", message="Task received by client",
                         time=datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC))
    terminated = TaskEvent(type="Terminated", message="Exit Code: 1",
                           details={"exit_code": 1, "signal": 0, "nested": {"a": [1, 2]}},
                           time=datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2))))
    store.add_event("a1", "web", received)
    store.add_event("a1", "worker", terminated)
    assert store.events("a1") == [("web", received), ("worker", terminated)]
    assert store.events("a1", "worker") == [("worker", terminated)]
    assert store.events("a1", "sidecar") == []


def test_event_details_that_json_cannot_hold_become_strings(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    when = datetime(2024, 5, 1, tzinfo=UTC)
    store.add_event("a1", "web", TaskEvent(type="Driver", details={"at": when, "path": store.path, "n": 3}))
    [(_, event)] = store.events("a1")
    assert event.details == {"at": str(when), "path": str(store.path), "n": 3}


def test_add_event_needs_the_alloc(store: Store) -> None:
    with pytest.raises(KeyError, match="nope"):
        store.add_event("nope", "web", TaskEvent(type="Received"))


def test_events_limit_keeps_the_latest(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    for number in range(5):
        store.add_event("a1", TASK_NAMES[number % 2], TaskEvent(type="Driver", message=str(number)))
    assert [event.message for _, event in store.events("a1", limit=3)] == ["2", "3", "4"]
    assert [event.message for _, event in store.events("a1", "web", limit=2)] == ["2", "4"]
    assert store.events("a1", limit=0) == []


def test_events_are_trimmed_per_task(store: Store, job: JobRecord) -> None:
    store.put_alloc(*make_alloc("a1", job))
    store.add_event("a1", "worker", TaskEvent(type="Received"))
    for number in range(EVENTS_KEPT + 5):
        store.add_event("a1", "web", TaskEvent(type="Driver", message=str(number)))
    web = store.events("a1", "web")
    assert [event.message for _, event in web] == [str(number) for number in range(5, EVENTS_KEPT + 5)]
    assert [event.type for _, event in store.events("a1", "worker")] == ["Received"]


def test_deferred(store: Store) -> None:
    soon = Deferred(kind="docker.image", key="busybox:1", payload={"image_id": "sha256:1"}, due=100.0)
    later = Deferred(kind="docker.image", key="redis:7", payload={"image_id": "sha256:2"}, due=300.0)
    other = Deferred(kind="cleanup", key="a1", due=200.0)
    for work in (later, other, soon):
        store.defer(work)

    assert store.deferred() == [soon, other, later]
    assert store.deferred("docker.image") == [soon, later]
    assert store.due(99.0) == []
    assert store.due(200.0) == [soon, other]

    postponed = replace(soon, payload={"image_id": "sha256:3"}, due=400.0)
    store.defer(postponed)
    assert store.deferred("docker.image") == [later, postponed]

    store.done("docker.image", "redis:7")
    store.done("docker.image", "redis:7")  # already done: nothing to do
    assert store.deferred() == [other, postponed]


def test_new_database_is_sound(store: Store) -> None:
    assert store.integrity_check() == []


def test_store_is_unusable_after_close(store: Store) -> None:
    store.close()
    with pytest.raises(StateError):
        store.job("x")



def test_a_parent_is_registered_stopped_and_forgotten(store: Store) -> None:
    parent = ParentRecord(name="nightly", source="api", text='{"job": {}}', registered_at=time.time())
    store.put_parent(parent)
    assert store.parents() == [parent]
    store.update_parent("nightly", last_launch=1000.0)
    store.update_parent("nightly", status="stopped")
    assert store.parents() == [replace(parent, status="stopped", last_launch=1000.0)]
    with pytest.raises(KeyError, match="no registered job other"):
        store.update_parent("other", status="stopped")
    store.delete_parent("nightly")
    assert store.parents() == []


def test_a_parent_submitted_again_keeps_its_last_launch(store: Store) -> None:
    store.put_parent(ParentRecord(name="nightly", source="api", text="{}", last_launch=1000.0, registered_at=1.0))
    store.put_parent(ParentRecord(name="nightly", source="cli", text="{ }", registered_at=2.0))
    [parent] = store.parents()
    assert (parent.text, parent.source, parent.last_launch, parent.status) == ("{ }", "cli", 1000.0, "running")
