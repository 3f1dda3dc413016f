"""Small helpers for the job file tests."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import pytest

from herder.errors import JobError
from herder.jobspec import load_job_text
from herder.model import Job


def load(text: str, fmt: str = "hcl", variables: Mapping[str, str] | None = None) -> Job:
    return load_job_text(textwrap.dedent(text), fmt, f"job.{fmt}", variables)


def problems(text: str, fmt: str = "hcl", variables: Mapping[str, str] | None = None) -> list[str]:
    with pytest.raises(JobError) as caught:
        load(text, fmt, variables)
    return caught.value.errors


def task_hcl(body: str, group_body: str = "") -> str:
    """A job with one group ``app`` and one raw_exec task ``server`` around ``body``."""
    return f"""
job "web" {{
  group "app" {{
{group_body}
    task "server" {{
      driver = "raw_exec"
{body}
    }}
  }}
}}
"""
