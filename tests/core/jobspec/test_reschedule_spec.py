"""A group's ``reschedule`` and ``ephemeral_disk`` blocks: Nomad's defaults, merges and checks."""

from __future__ import annotations

import json

import pytest

from herder.model import EphemeralDisk, ReschedulePolicy

from .helpers import load, problems, task_hcl

HOUR = 3600.0


@pytest.mark.parametrize(("job_type", "policy"), [
    ("service", ReschedulePolicy(delay=30, delay_function="exponential", max_delay=HOUR, unlimited=True)),
    ("batch", ReschedulePolicy(attempts=1, interval=24 * HOUR, delay=5, delay_function="constant")),
    ("system", None),
    ("sysbatch", None),
])
def test_each_job_type_has_nomads_default(job_type: str, policy: ReschedulePolicy | None) -> None:
    job = load(task_hcl("").replace('job "web" {', f'job "web" {{\n  type = "{job_type}"'))
    assert job.groups[0].reschedule == policy
    assert job.groups[0].ephemeral_disk == EphemeralDisk()


def test_the_groups_block_over_the_jobs_over_the_default() -> None:
    text = task_hcl("", group_body='reschedule {\n delay = "200ms"\n }\nephemeral_disk {\n sticky = true\n }')
    job = load(text.replace('job "web" {',
                            'job "web" {\n  reschedule {\n delay_function = "fibonacci"\n max_delay = "10s"\n }'))
    group = job.groups[0]
    assert group.reschedule == ReschedulePolicy(delay=0.2, delay_function="fibonacci", max_delay=10, unlimited=True)
    assert group.ephemeral_disk.sticky and group.ephemeral_disk.carried
    assert job.warnings == []


def test_nomads_json_policy_in_nanoseconds() -> None:
    document = {"Job": {"ID": "x", "Type": "batch", "TaskGroups": [{
        "Name": "g", "ReschedulePolicy": {"Attempts": 3, "Interval": 3_600_000_000_000, "Delay": 200_000_000,
                                          "DelayFunction": "exponential", "MaxDelay": 2_000_000_000,
                                          "Unlimited": False},
        "EphemeralDisk": {"Sticky": True, "Migrate": True, "SizeMB": 150},
        "Tasks": [{"Name": "t", "Driver": "raw_exec"}]}]}}
    group = load(json.dumps(document), "json").groups[0]
    assert group.reschedule == ReschedulePolicy(attempts=3, interval=HOUR, delay=0.2, delay_function="exponential",
                                                max_delay=2.0)
    assert group.ephemeral_disk == EphemeralDisk(size=150, sticky=True, migrate=True)


@pytest.mark.parametrize(("block", "error"), [
    ('attempts = 2\n interval = "1h"', "job.groups[0].reschedule: attempts = 2 with unlimited = true is ambiguous"),
    ('attempts = 2\n unlimited = false', "job.groups[0].reschedule.interval: must be given when attempts is more "
                                         "than 0"),
    ('delay = "10s"\n max_delay = "5s"', "job.groups[0].reschedule.max_delay: 5s is less than the delay (10s)"),
    ('attempts = 5\n interval = "20s"\n delay = "10s"\n delay_function = "constant"\n unlimited = false',
     "job.groups[0].reschedule.interval: only 2 of the 5 attempts fit in 20s with these delays: make it at least 50s"),
    ('attempts = 5\n interval = "1m"\n delay = "10s"\n max_delay = "1m"\n unlimited = false',
     "job.groups[0].reschedule.interval: only 3 of the 5 attempts fit in 1m with these delays: make it at least 2m40s"),
    ('attempts = 5\n interval = "20s"\n delay = "5s"\n delay_function = "fibonacci"\n max_delay = "1m"\n'
     ' unlimited = false',  # 5, 5, 10, 15, 25: Nomad compares the last delay alone with the interval
     "job.groups[0].reschedule.interval: only 4 of the 5 attempts fit in 20s with these delays: make it at least 25s"),
    ('delay_function = "linear"', "job.groups[0].reschedule.delay_function: 'linear' is not one of constant, "
                                  "exponential, fibonacci"),
])
def test_a_policy_nomad_refuses_is_refused_naming_the_field(block: str, error: str) -> None:
    found = problems(task_hcl("", group_body=f"reschedule {{\n {block}\n }}"))
    assert len(found) == 1 and error in found[0], found


def test_a_system_job_is_never_rescheduled() -> None:
    text = task_hcl("", group_body="reschedule {\n attempts = 1\n }")
    text = text.replace('job "web" {', 'job "web" {\n type = "system"')
    assert problems(text) == ["job.hcl:5: job.groups[0].reschedule: system jobs are not rescheduled: remove the block"]
