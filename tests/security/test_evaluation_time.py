"""A job of a few hundred bytes whose evaluation takes hours, under the step count (SPEC §14).

One step of HCL's evaluation may be a call that works through a megabyte:
``regexall`` building half a million matches takes seconds, and a ``for`` loop
repeats it in a few steps each, so 1,000 turns stayed far under 1,000,000 steps
and held the thread that parsed the job (and a core) for half an hour. The
evaluation is bounded in time as well, checked at every step: an error naming the limit, soon.
"""

from __future__ import annotations

import pytest

from herder.errors import JobError
from herder.jobspec import load, load_job_text

MEGABYTE_OF_MATCHES = 'regexall("0", join("", [for j in range(50) : format("%010000d", j)]))'
JOB = f"""
job "slow" {{
  meta {{
    x = sum([for i in range(1000) : length({MEGABYTE_OF_MATCHES})])
  }}
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/true"
      }}
    }}
  }}
}}
"""


def test_an_evaluation_slow_in_few_steps_is_stopped_naming_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each turn of the loop is a few steps scanning a megabyte: the reading's time limit (lowered
    # here) is checked at every step, not only every so many, so it stops after the first turns.
    monkeypatch.setattr(load, "MAX_SECONDS", 0.5)
    with pytest.raises(JobError) as raised:
        load_job_text(JOB, "hcl", "slow.hcl")
    assert "takes more than 0.5 s of CPU time (its limit)" in raised.value.errors[0], raised.value.errors
