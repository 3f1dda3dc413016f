"""A group's update strategy, as a deployment follows it: the group's over the job's over Nomad's defaults."""

from __future__ import annotations

from herder.agent.nomad.ledger import SECOND, Update


def test_a_group_without_update_gets_nomads_defaults() -> None:
    assert Update.of({}, {}) == Update(health_check="checks", min_healthy_time=10.0, healthy_deadline=300.0,
                                      progress_deadline=600.0, auto_revert=False)


def test_the_groups_update_wins_over_the_jobs_and_null_is_the_default() -> None:
    job = {"Update": {"MinHealthyTime": 2 * SECOND, "HealthCheck": "task_states", "AutoRevert": None}}
    group = {"Update": {"MinHealthyTime": 1 * SECOND, "HealthyDeadline": None}}
    update = Update.of(job, group)
    assert update is not None
    assert (update.min_healthy_time, update.health_check, update.healthy_deadline, update.auto_revert) == \
        (1.0, "task_states", 300.0, False)


def test_max_parallel_zero_is_not_deployed() -> None:
    assert Update.of({"Update": {"MaxParallel": 0}}, {}) is None
    assert Update.of({"Update": {"MaxParallel": 0}}, {"Update": {"MaxParallel": 2}}) is not None
