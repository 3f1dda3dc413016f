"""Reading a job: from a file on the user's side, or from the text submitted to the agent."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from herder.client.client import JobSource
from herder.errors import JobError
from herder.jobspec import JobFiles, evaluate_job_text, load_job_text, validate_task_configs
from herder.jobspec.formats import format_of, read_text, read_var_file
from herder.jobspec.task_config import network_problems
from herder.model import Job
from herder.plugins.hooks import Hooks
from herder.state import JobRecord


def parse_variables(items: Iterable[str]) -> dict[str, str]:
    """``KEY=VALUE`` items as a mapping; :class:`JobError` for one without ``=``."""
    values: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise JobError([f"--var {item!r}: expected KEY=VALUE"])
        values[key] = value
    return values


def evaluate_job(path: Path, variables: Mapping[str, str], var_files: Sequence[Path] = (), *,
                 allow_file_outside: bool = False) -> tuple[Job, JobSource]:
    """Read and evaluate the job file at ``path`` on the user's side: its
    variables, and ``file()`` relative to its directory (inside it unless
    ``allow_file_outside``). The source given back is the evaluated canonical
    document, which rebuilds the same job without variables or files: what
    ``herder job run`` submits, and what a foreground run stores.

    ``var_files`` (``--var-file``) give values in order, a later file winning;
    ``variables`` (``--var``) win over them all, as in Nomad.

    :raises JobError: listing every problem, each with its path.
    """
    given: dict[str, str] = {}
    for var_file in var_files:
        given |= read_var_file(var_file)
    given |= variables
    job, document = evaluate_job_text(read_text(path), format_of(path), str(path), given,
                                      JobFiles(path.parent, allow_file_outside))
    return job, JobSource(text=json.dumps(document), format="json", source=str(path))


def read_job(path: Path, variables: Mapping[str, str], hooks: Hooks, var_files: Sequence[Path] = (), *,
             allow_file_outside: bool = False) -> tuple[Job, JobSource]:
    """Parse and validate the job file at ``path`` (see :func:`evaluate_job`), each task's config included.

    :raises JobError: listing every problem, each with its path.
    """
    job, source = evaluate_job(path, variables, var_files, allow_file_outside=allow_file_outside)
    check_task_configs(job, hooks)
    return job, source


def load_submitted(source: JobSource, hooks: Hooks, lines: Mapping[str, int] | None = None) -> Job:
    """A job from text submitted to the agent, which reads no file, validated
    against the drivers' config schemas. ``lines`` (the line of each path in
    the file a canonical document was evaluated from) place the messages."""
    job = load_job_text(source.text, source.format, source.source, source.variables)
    if lines:
        job.lines = dict(lines)
    check_task_configs(job, hooks)
    return job


def check_task_configs(job: Job, hooks: Hooks) -> None:
    """Every task's driver is there, its config is valid and it can run the task in its group's
    network; :class:`JobError` otherwise."""
    errors = validate_task_configs(job, hooks.task_schemas(), hooks.plugins.unavailable())
    if not errors:
        errors = network_problems(job, lambda driver: hooks.capabilities(driver).network_isolation)
    if errors:
        raise JobError(errors)


def canonical_document(submitted: JobSource | JobRecord) -> dict[str, Any]:
    """The evaluated canonical document of a job as ``submitted``: what rebuilds it without variables."""
    _, document = evaluate_job_text(submitted.text, submitted.format, submitted.source, submitted.variables)
    return document
