"""Job files: HCL (Nomad's jobspec), JSON and YAML, into one validated :class:`Job`."""

from __future__ import annotations

from herder.jobspec.files import JobFiles
from herder.jobspec.interpolate import interpolate, interpolate_service, interpolate_task, task_lookup
from herder.jobspec.load import evaluate_job_text, load_job, load_job_text
from herder.jobspec.task_config import validate_config, validate_task_configs
from herder.sdk.durations import format_duration, parse_duration

__all__ = [
    "JobFiles",
    "evaluate_job_text",
    "format_duration",
    "interpolate",
    "interpolate_service",
    "interpolate_task",
    "load_job",
    "load_job_text",
    "parse_duration",
    "task_lookup",
    "validate_config",
    "validate_task_configs",
]
