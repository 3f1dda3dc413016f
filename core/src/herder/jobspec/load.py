"""Loading a job file: read, substitute variables, validate, build.

Problems are collected per stage (reading, variables, the job schema, the
checks on the built job) and reported together as one :class:`JobError`; a
later stage runs only when the earlier ones found nothing, since it relies on
their result.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from herder.deadline import TimeLimitExceeded, time_limit
from herder.errors import JobError
from herder.jobspec.build import build_job
from herder.jobspec.files import JobFiles
from herder.jobspec.formats import MAX_JOB_SIZE, format_of, parse_text, read_text
from herder.jobspec.nomad_json import from_nomad, is_nomad_json
from herder.jobspec.paths import Locator, renumber
from herder.jobspec.paths import Path as DocPath
from herder.jobspec.stanzas import drop_connect_gateways, drop_unimplemented, host_networking
from herder.jobspec.validate import validate_job_document
from herder.jobspec.variables import apply_variables
from herder.model import Job

MAX_SECONDS = 20.0
"""The longest one job's reading may take, parse and evaluation together (CPU seconds, :mod:`herder.deadline`)."""


def load_job(path: Path, variables: Mapping[str, str] | None = None, *, allow_file_outside: bool = False) -> Job:
    """Load the job file at ``path``; its extension names the format.

    ``variables`` (``--var NAME=VALUE``) override the job file's variable
    defaults; ``file()`` reads relative to the file's directory, inside it
    unless ``allow_file_outside``. Raises :class:`JobError` listing every
    problem found.
    """
    files = JobFiles(path.parent, allow_file_outside)
    return load_job_text(read_text(path), format_of(path), str(path), variables, files)


def load_job_text(text: str, fmt: str, source_name: str = "<job>", variables: Mapping[str, str] | None = None,
                  files: JobFiles | None = None) -> Job:
    """Load a job from ``text`` in ``fmt`` (``hcl``, ``json`` or ``yaml``);
    ``source_name`` names it in messages (and nothing else). ``file()`` reads
    through ``files``: without them, as for text sent to the agent, it is an
    error."""
    return evaluate_job_text(text, fmt, source_name, variables, files)[0]


def evaluate_job_text(text: str, fmt: str, source_name: str = "<job>", variables: Mapping[str, str] | None = None,
                      files: JobFiles | None = None) -> tuple[Job, dict[str, Any]]:
    """As :func:`load_job_text`, with the evaluated canonical document beside the job.

    The document has every variable, local and function evaluated, and its
    strings written so that evaluating it again changes nothing: loaded as
    JSON, it rebuilds the same job with no variables and no files. ``herder
    job run`` submits it, so that the agent never reads the user's files.
    """
    try:
        with time_limit(MAX_SECONDS, "reading the job (parse and evaluation)"):
            return _load(text, fmt, source_name, variables, files)
    except TimeLimitExceeded as exc:
        raise JobError([f"{source_name}: {exc}"]) from None
    except RecursionError:
        raise JobError([f"{source_name}: the job file is nested too deeply"]) from None


def _load(text: str, fmt: str, source: str, variables: Mapping[str, str] | None,
          files: JobFiles | None) -> tuple[Job, dict[str, Any]]:
    if len(text) > MAX_JOB_SIZE:
        raise JobError([f"{source}: the job file is larger than {MAX_JOB_SIZE} bytes"])
    if not text.strip():
        raise JobError([f"{source}: the job file is empty"])
    document, lines = parse_text(text, fmt, source)
    if document is None or document == {}:
        raise JobError([f"{source}: the job file is empty"])
    if not isinstance(document, dict):
        raise JobError([f"{source}: the job file must be a mapping with a 'job' key, not {_kind(document)}"])
    if fmt == "json" and is_nomad_json(document):
        document = from_nomad(document)
    gateways = drop_connect_gateways(document)
    if gateways:
        kept = [index for index in range(len(gateways) + len(document["job"]["groups"])) if index not in gateways]
        lines = renumber(lines, ("job", "groups"), kept)
    locator = Locator(source, lines)
    if gateways and not document["job"]["groups"]:
        raise JobError([locator.format(("job", "groups"), "holds only Connect gateway groups, which herder "
                                                          "does not run")])
    dropped = drop_unimplemented(document)
    problems, coercible = apply_variables(document, variables, files)
    _raise_if(problems, locator)
    modes = host_networking(document)
    _raise_if(validate_job_document(document, coercible, everywhere=fmt == "hcl"), locator)
    canonical = {"job": as_written(document["job"])}
    job, problems = build_job(document)
    _raise_if(problems, locator)
    job.source, job.lines = source, lines
    if dropped:
        job.warnings.append(f"ignoring stanzas herder does not implement: {', '.join(dropped)}")
    if gateways:
        names = ", ".join(gateways.values())
        job.warnings.append(f"herder does not run Connect gateways: group(s) {names} left out")
    if modes:
        job.warnings.append(f"task network mode {', '.join(modes)} runs as host networking "
                            "(a group's network block gives the allocation a namespace of its own)")
    return job, canonical


def as_written(value: Any) -> Any:
    """``value`` with every string escaped as a template of itself (``${`` as
    ``$${``, ``%{`` as ``%%{``): evaluating it gives ``value`` back. A runtime
    reference stays one: ``$${NOMAD_PORT_http}`` evaluates to ``${NOMAD_PORT_http}``."""
    if isinstance(value, dict):
        return {key: as_written(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_written(item) for item in value]
    if isinstance(value, str):
        return value.replace("${", "$${").replace("%{", "%%{")
    return value


def _raise_if(problems: list[tuple[DocPath, str]], locator: Locator) -> None:
    if not problems:
        return
    messages: list[str] = []
    for path, message in sorted(problems, key=lambda problem: locator.line_of(problem[0]) or 0):
        text = locator.format(path, message) if path else f"{locator.source}: {message}"
        if text not in messages:
            messages.append(text)
    raise JobError(messages)


_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _kind(value: Any) -> str:
    return _KINDS.get(type(value), type(value).__name__)
