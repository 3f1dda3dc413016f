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

from herder.errors import JobError
from herder.jobspec.build import build_job
from herder.jobspec.formats import format_of, parse_text, read_text
from herder.jobspec.nomad_json import from_nomad, is_nomad_json
from herder.jobspec.paths import Locator, renumber
from herder.jobspec.paths import Path as DocPath
from herder.jobspec.stanzas import drop_connect_gateways, drop_unimplemented, host_networking
from herder.jobspec.validate import validate_job_document
from herder.jobspec.variables import apply_variables
from herder.model import Job


def load_job(path: Path, variables: Mapping[str, str] | None = None) -> Job:
    """Load the job file at ``path``; its extension names the format.

    ``variables`` (``--var NAME=VALUE``) override the job file's variable
    defaults. Raises :class:`JobError` listing every problem found.
    """
    return load_job_text(read_text(path), format_of(path), str(path), variables)


def load_job_text(text: str, fmt: str, source_name: str = "<job>", variables: Mapping[str, str] | None = None) -> Job:
    """Load a job from ``text`` in ``fmt`` (``hcl``, ``json`` or ``yaml``);
    ``source_name`` names it in messages, and ``file()`` reads paths relative
    to its directory."""
    try:
        return _load(text, fmt, source_name, variables)
    except RecursionError:
        raise JobError([f"{source_name}: the job file is nested too deeply"]) from None


def _load(text: str, fmt: str, source: str, variables: Mapping[str, str] | None) -> Job:
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
    problems, coercible = apply_variables(document, variables, Path(source).parent)
    _raise_if(problems, locator)
    modes = host_networking(document)
    _raise_if(validate_job_document(document, coercible, everywhere=fmt == "hcl"), locator)
    job, problems = build_job(document)
    _raise_if(problems, locator)
    job.source, job.lines = source, lines
    if dropped:
        job.warnings.append(f"ignoring stanzas herder does not implement: {', '.join(dropped)}")
    if gateways:
        names = ", ".join(gateways.values())
        job.warnings.append(f"herder does not run Connect gateways: group(s) {names} left out")
    if modes:
        job.warnings.append(f"network mode {', '.join(modes)} runs as host networking "
                            "(herder has no network namespaces outside its drivers)")
    return job


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
