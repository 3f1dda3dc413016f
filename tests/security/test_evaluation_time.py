"""A job of a few hundred bytes whose evaluation takes hours, under the step count (SPEC §14).

One step of HCL's evaluation may be a call that works through a megabyte:
``regexall`` building half a million matches takes seconds, and a ``for`` loop
repeats it in a few steps each, so 1,000 turns stayed far under 1,000,000 steps
and held the thread that parsed the job (and a core) for half an hour. The
evaluation is bounded in time as well: an error naming the limit, soon.
"""

from __future__ import annotations

import threading
import time

from herder.errors import JobError
from herder.jobspec import load_job_text

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


def test_an_evaluation_slow_in_few_steps_is_stopped_naming_the_limit() -> None:
    errors: list[str] = []

    def load() -> None:
        try:
            load_job_text(JOB, "hcl", "slow.hcl")
        except JobError as exc:
            errors.extend(exc.errors)

    started = time.monotonic()
    loading = threading.Thread(target=load, daemon=True)  # unbounded, it would run on for half an hour
    loading.start()
    loading.join(60)
    assert not loading.is_alive(), "the evaluation still runs after 60 s"
    assert errors and "the job's expressions take more than 10 s to evaluate" in errors[0], errors
    assert time.monotonic() - started < 60
