"""The validated canonical document -> :class:`Job`, with Nomad's defaults.

Also the checks a schema cannot express: unique names, restart policies (and,
in :mod:`herder.jobspec.service_blocks`, service and check ports that must name
one of the task's ports).

Ports of a group-level ``network`` belong to the allocation: allocated once
and shared by every task of the group, beside each task's own ports.
"""

from __future__ import annotations

import base64
import posixpath
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from herder.jobspec import group_keys
from herder.jobspec.connect import ConnectBuilder, sidecar_ports
from herder.jobspec.constraint_blocks import build_constraints
from herder.jobspec.cron import CronError, load_zone, parse_cron
from herder.jobspec.fields import duration, integer, texts
from herder.jobspec.network import group_network
from herder.jobspec.paths import Path
from herder.jobspec.reschedule import ephemeral_disk, reschedule_policy
from herder.jobspec.service_blocks import ServiceBlocks
from herder.jobspec.volumes import group_volumes, task_mounts
from herder.model import (
    PAYLOAD_OPTIONAL,
    Artifact,
    Group,
    Job,
    Lifecycle,
    LogConfig,
    Parameterized,
    Periodic,
    PortSpec,
    Resources,
    RestartPolicy,
    Task,
    Template,
    Update,
)
from herder.sdk.durations import format_duration, parse_duration
from herder.sdk.redact import redact_url

_SERVICE_RESTART: dict[str, Any] = {"attempts": 2, "interval": 30 * 60.0, "delay": 15.0, "mode": "fail"}
_BATCH_RESTART: dict[str, Any] = {"attempts": 3, "interval": 24 * 3600.0, "delay": 15.0, "mode": "fail"}
# Nomad's api.TaskGroup.Canonicalize: service and system jobs get the service
# policy, every other type (batch, sysbatch) the batch one.
RESTART_DEFAULTS: dict[str, dict[str, Any]] = {
    "service": _SERVICE_RESTART,
    "system": _SERVICE_RESTART,
    "batch": _BATCH_RESTART,
    "sysbatch": _BATCH_RESTART,
}
MIN_RESTART_INTERVAL = 5.0
PARENT_TYPES = ("batch", "sysbatch")
"""The job types that may be periodic or parameterized (Nomad's rule)."""
UPDATED_TYPES = ("service", "system")
"""The job types that may have an ``update`` block (Nomad's rule); only a service job's updates are deployments."""
RESERVED_TASK_NAME = "alloc"  # its directory would be the allocation's shared one
_UPDATE_DURATIONS = {"min_healthy_time", "healthy_deadline", "progress_deadline", "stagger"}


def build_job(document: dict[str, Any]) -> tuple[Job, list[tuple[Path, str]]]:
    """Build the job from a document that passed the job schema."""
    builder = _Builder(document["job"])
    job = builder.job()
    job.warnings.extend(builder.warnings)
    return job, builder.problems


@dataclass(frozen=True)
class _GroupContext:
    """What a group passes down to its tasks."""

    name: str
    restart: dict[str, Any]
    ports: tuple[PortSpec, ...]
    volumes: frozenset[str]


class _Builder:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.problems: list[tuple[Path, str]] = []
        self.warnings: list[str] = []
        self.services = ServiceBlocks(self.problem, self.warnings)

    def problem(self, path: Path, message: str) -> None:
        self.problems.append((path, message))

    def unique(self, names: list[str], path: Path, key: str, what: str) -> None:
        seen: set[str] = set()
        for index, name in enumerate(names):
            if name in seen:
                self.problem((*path, index, key), f"duplicate {what} {name!r}")
            seen.add(name)

    def job(self) -> Job:
        spec = self.spec
        job_type = spec.get("type", "service")
        path: Path = ("job", "groups")
        groups = [self.group(group, (*path, index), job_type) for index, group in enumerate(spec["groups"])]
        self.unique([group.name for group in groups], path, "name", "group name")
        return Job(
            name=spec["name"],
            type=job_type,
            groups=groups,
            datacenters=list(spec.get("datacenters", ["dc1"])),
            region=spec.get("region", "global"),
            meta=texts(spec.get("meta")),
            periodic=self.periodic(spec["periodic"], job_type) if "periodic" in spec else None,
            parameterized=self.parameterized(spec["parameterized"], job_type) if "parameterized" in spec else None,
            parent_id=spec.get("parent_id", ""),
            payload=self.payload(spec.get("payload", "")),
            constraints=build_constraints(spec.get("constraints", []), ("job", "constraints"), self.problem),
        )

    def parent_type(self, path: Path, job_type: str, what: str) -> None:
        if job_type not in PARENT_TYPES:
            self.problem(path, f"only batch and sysbatch jobs may be {what} (this job is {job_type})")

    def periodic(self, spec: dict[str, Any], job_type: str) -> Periodic:
        """Nomad's ``PeriodicConfig.Validate``; an empty ``cron`` or ``crons`` is not given, as in Nomad's JSON."""
        path: Path = ("job", "periodic")
        self.parent_type(path, job_type, "periodic")
        crons: list[tuple[str, Path]] = [(spec["cron"], (*path, "cron"))] if spec.get("cron") else []
        given = spec.get("crons", [])
        if crons and given:
            self.problem(path, "give cron or crons, not both")
        crons += [(cron, (*path, "crons", index)) for index, cron in enumerate(given)]
        if not crons:
            self.problem(path, "needs cron or crons")
        for cron, cron_path in crons:
            try:
                parse_cron(cron)
            except CronError as exc:
                self.problem(cron_path, str(exc))
        time_zone = spec.get("time_zone") or "UTC"
        try:
            load_zone(time_zone)
        except ValueError as exc:
            self.problem((*path, "time_zone"), str(exc))
        return Periodic(
            crons=tuple(cron for cron, _ in crons),
            prohibit_overlap=spec.get("prohibit_overlap", False),
            time_zone=time_zone,
            enabled=spec.get("enabled", True),
        )

    def parameterized(self, spec: dict[str, Any], job_type: str) -> Parameterized:
        """Nomad's ``ParameterizedJobConfig.Validate``."""
        path: Path = ("job", "parameterized")
        self.parent_type(path, job_type, "parameterized")
        required, optional = tuple(spec.get("meta_required", [])), tuple(spec.get("meta_optional", []))
        both = [key for key in optional if key in required]
        if both:
            self.problem((*path, "meta_optional"), f"{', '.join(map(repr, both))} also in meta_required "
                                                   "(a key is required or optional, not both)")
        return Parameterized(payload=spec.get("payload", PAYLOAD_OPTIONAL), meta_required=required,
                             meta_optional=optional)

    def payload(self, text: str) -> bytes:
        try:
            return base64.b64decode(text, validate=True)
        except ValueError:
            self.problem(("job", "payload"), "must be base64")
            return b""

    def group(self, spec: dict[str, Any], path: Path, job_type: str) -> Group:
        restart = RESTART_DEFAULTS[job_type] | self.restart_fields(spec.get("restart", {}))
        policy = self.restart_policy(restart, (*path, "restart"))
        ports_path: Path = (*path, "network", "ports")
        ports = self.ports(
            [(port, (*ports_path, index)) for index, port in enumerate(spec.get("network", {}).get("ports", []))]
        )
        volumes = group_volumes(spec.get("volumes", []), (*path, "volumes"), self.problem)
        ports += sidecar_ports(spec.get("services", []), ports, f"{self.spec['name']}-{spec['name']}")
        context = _GroupContext(spec["name"], restart, ports, frozenset(volume.name for volume in volumes))
        tasks = [self.task(task, (*path, "tasks", index), context) for index, task in enumerate(spec["tasks"])]
        self.unique([task.name for task in tasks], (*path, "tasks"), "name", "task name")
        leaders = [index for index, task in enumerate(tasks) if task.leader]
        for index in leaders[1:]:
            self.problem((*path, "tasks", index, "leader"), "only one task of a group may be the leader")
        if not any(task.is_main for task in tasks):
            self.problem((*path, "tasks"), "needs at least one main task (one without a lifecycle block)")
        connect = ConnectBuilder(self.problem, lambda task, where: self.task(task, where, context), spec, path, ports)
        services = tuple(
            self.services.service(service, (*path, "services", index), {port.label for port in ports},
                         f"{self.spec['name']}-{spec['name']}", tasks={task.name for task in tasks},
                         connect=connect)
            for index, service in enumerate(spec.get("services", []))
        )
        self.services.one_provider(spec, path)
        # Nomad's TaskGroup.Canonicalize: without a count, a scaling block's min, else 1.
        count = integer(spec, "count", integer(spec.get("scaling", {}), "min", 1))
        tasks += connect.sidecars
        return Group(
            name=spec["name"],
            count=count,
            restart=policy,
            tasks=tasks,
            meta=texts(spec.get("meta")),
            ports=ports,
            network=group_network(spec.get("network", {})),
            services=services,
            reschedule=reschedule_policy(self.spec, spec, path, self.problem),
            ephemeral_disk=ephemeral_disk(spec.get("ephemeral_disk", {}), [task.resources.disk for task in tasks]),
            update=self.update(spec.get("update"), (*path, "update"), job_type),
            constraints=build_constraints(spec.get("constraints", []), (*path, "constraints"), self.problem),
            volumes=volumes,
            max_run_duration=group_keys.max_run_duration(spec, path, job_type, self.problem),
            scaling=group_keys.scaling(spec.get("scaling"), (*path, "scaling"), count, self.problem),
        )

    def update(self, spec: dict[str, Any] | None, path: Path, job_type: str) -> Update | None:
        """The group's update strategy: its block over the job's over Nomad's defaults
        (``api.TaskGroup.Canonicalize``), checked as ``UpdateStrategy.Validate`` does."""
        if job_type != "service":
            if job_type not in UPDATED_TYPES and (spec is not None or "update" in self.spec):
                self.problem(path if spec is not None else ("job", "update"),
                             f"a {job_type} job has no update strategy (only service and system jobs do)")
            return None  # a system job's allocations are replaced all at once, as without a deployment
        fields: dict[str, Any] = {}
        for given in (self.spec.get("update") or {}, spec or {}):
            fields |= {key: parse_duration(value) if key in _UPDATE_DURATIONS else value
                       for key, value in given.items()}
        update = Update(**fields)
        if update.canary == 0 and update.auto_promote:
            self.problem((*path, "auto_promote"), "needs a canary count greater than zero")
        if update.healthy_deadline <= 0:
            self.problem((*path, "healthy_deadline"), "must be greater than zero")
        elif update.min_healthy_time >= update.healthy_deadline:
            self.problem((*path, "min_healthy_time"), f"must be less than healthy_deadline "
                                                      f"({format_duration(update.healthy_deadline)})")
        if update.progress_deadline and update.healthy_deadline >= update.progress_deadline:
            self.problem((*path, "healthy_deadline"), f"must be less than progress_deadline "
                                                      f"({format_duration(update.progress_deadline)})")
        if update.stagger <= 0:
            self.problem((*path, "stagger"), "must be greater than zero")
        return update

    def restart_fields(self, spec: dict[str, Any]) -> dict[str, Any]:
        fields: dict[str, Any] = {"mode": spec["mode"]} if "mode" in spec else {}
        if "attempts" in spec:
            fields["attempts"] = int(spec["attempts"])
        fields |= {key: parse_duration(spec[key]) for key in ("interval", "delay") if key in spec}
        return fields

    def restart_policy(self, fields: dict[str, Any], path: Path) -> RestartPolicy:
        """Nomad's ``RestartPolicy.Validate``, on the policy with defaults filled in."""
        policy = RestartPolicy(**fields)
        if policy.attempts == 0 and policy.mode != "fail":
            self.problem((*path, "attempts"), f'0 attempts in mode {policy.mode!r} is ambiguous (use mode "fail")')
        if policy.interval < MIN_RESTART_INTERVAL:
            self.problem((*path, "interval"), f"must be at least {format_duration(MIN_RESTART_INTERVAL)}")
        if policy.attempts * policy.delay > policy.interval:
            self.problem(
                path,
                f"cannot restart {policy.attempts} times in an interval of {format_duration(policy.interval)} "
                f"with a delay of {format_duration(policy.delay)}",
            )
        return policy

    def task(self, spec: dict[str, Any], path: Path, group: _GroupContext) -> Task:
        if spec["name"] == RESERVED_TASK_NAME:
            self.problem((*path, "name"), f"{RESERVED_TASK_NAME!r} is the allocation's shared directory")
        resources = spec.get("resources", {})
        memory, memory_max = integer(resources, "memory", 300), integer(resources, "memory_max", 0)
        if memory_max > 0 and memory_max < memory:
            self.problem((*path, "resources", "memory_max"), f"{memory_max} is below memory ({memory})")
        if "cpu" in resources and resources.get("cores", 0) > 0:
            self.problem((*path, "resources", "cores"), "a task can only ask for 'cpu' or 'cores', not both")
        own_ports_path: Path = (*path, "resources", "network", "ports")
        own_ports = [
            (port, (*own_ports_path, index)) for index, port in enumerate(resources.get("network", {}).get("ports", []))
        ]
        ports = self.ports(own_ports, taken=group.ports)
        labels = {port.label for port in (*group.ports, *ports)}
        logs = spec.get("logs", {})
        restart = None
        if "restart" in spec:
            restart = self.restart_policy(group.restart | self.restart_fields(spec["restart"]), (*path, "restart"))
        default_name = f"{self.spec['name']}-{group.name}-{spec['name']}"
        services = tuple(
            self.services.service(service, (*path, "services", index), labels, default_name)
            for index, service in enumerate(spec.get("services", []))
        )
        templates = tuple(
            self.template(template, (*path, "templates", index))
            for index, template in enumerate(spec.get("templates", []))
        )
        payload_file = spec.get("dispatch_payload", {}).get("file", "")
        if payload_file:
            self.payload_file(payload_file, (*path, "dispatch_payload", "file"))
        return Task(
            name=spec["name"],
            driver=spec["driver"],
            config=spec.get("config", {}),
            env=texts(spec.get("env")),
            user=spec.get("user", ""),
            leader=spec.get("leader", False),
            kill_timeout=duration(spec, "kill_timeout", 5.0),
            kill_signal=spec.get("kill_signal", ""),
            shutdown_delay=duration(spec, "shutdown_delay", 0.0),
            meta=texts(spec.get("meta")),
            resources=Resources(cpu=integer(resources, "cpu", 100), memory=memory, ports=ports, memory_max=memory_max,
                                disk=integer(resources, "disk", 0), cores=integer(resources, "cores", 0)),
            constraints=build_constraints(spec.get("constraints", []), (*path, "constraints"), self.problem),
            services=services,
            artifacts=tuple(
                self.artifact(artifact, (*path, "artifacts", index))
                for index, artifact in enumerate(spec.get("artifacts", []))
            ),
            templates=templates,
            logs=LogConfig(max_files=integer(logs, "max_files", 10), max_file_size=integer(logs, "max_file_size", 10)),
            restart=restart,
            lifecycle=self.lifecycle(spec["lifecycle"]) if "lifecycle" in spec else None,
            dispatch_payload=payload_file,
            volume_mounts=task_mounts(spec.get("volume_mounts", []), (*path, "volume_mounts"), set(group.volumes),
                                      self.problem),
            identities=group_keys.identities(spec.get("identity", []), (*path, "identity"), self.problem),
        )

    @staticmethod
    def lifecycle(spec: dict[str, Any]) -> Lifecycle:
        return Lifecycle(hook=spec["hook"], sidecar=spec.get("sidecar", False))

    def ports(
        self, specs: list[tuple[dict[str, Any], Path]], taken: tuple[PortSpec, ...] = ()
    ) -> tuple[PortSpec, ...]:
        """Ports of a group or a task; labels (ignoring case, as Nomad 0.6 did) and static ports must
        be unique, also against the group's ports (``taken``)."""
        labels = {port.label.lower(): port.label for port in taken}
        by_static = {port.static: port.label for port in taken if port.static is not None}
        result: list[PortSpec] = []
        for port, path in specs:
            label, static, to = port["label"], integer(port, "static", None), integer(port, "to", None)
            if to is not None and to <= 0:  # Nomad's -1 ("the same port inside as outside") and 0 (unset)
                to = None
            if label.lower() in labels:
                other = labels[label.lower()]
                message = f"duplicate port label {label!r}" if other == label else \
                    f"port label {label!r} collides with {other!r} (labels must differ in more than case)"
                self.problem((*path, "label"), message)
                continue
            if static is not None and static in by_static:
                self.problem((*path, "static"), f"static port {static} is already used by port {by_static[static]!r}")
            labels[label.lower()] = label
            if static is not None:
                by_static.setdefault(static, label)
            result.append(PortSpec(label=label, static=static, to=to))
        return tuple(result)

    def confined(self, value: str, path: Path) -> None:
        """A path inside the task directory (or the allocation's shared one, as
        ``alloc/...`` or Nomad's ``../alloc/...``). One made at run time by
        interpolation is checked then, with symlinks resolved."""
        if "${" in value:
            return
        if PurePosixPath(value).is_absolute():
            self.problem(path, f"{value!r} must be relative to the task directory")
            return
        normal = posixpath.normpath(value)
        if (normal == ".." or normal.startswith("../")) and not (normal == "../alloc" or
                                                                 normal.startswith("../alloc/")):
            self.problem(path, f"{value!r} escapes the task directory")

    def payload_file(self, value: str, path: Path) -> None:
        """A dispatch payload's file: a file name inside the task's ``local/`` directory."""
        problem = payload_file_problem(value)
        if problem:
            self.problem(path, problem)

    def artifact(self, spec: dict[str, Any], path: Path) -> Artifact:
        options = texts(spec.get("options"))
        source = spec["source"]
        getter, _, url = source.partition("::") if "::" in source.split("://", 1)[0] else ("", "", source)
        if getter.lower() == "git":
            self.git_artifact(url, options, spec.get("mode", "any"), path)
        elif getter:
            self.problem((*path, "source"), f"{redact_url(source)!r}: herder does not fetch go-getter's {getter}:: "
                                            f"sources (it fetches {', '.join(ARTIFACT_SCHEMES)} and git::)")
        else:
            scheme = source.split("://", 1)[0].lower() if "://" in source else "file"
            if scheme not in ARTIFACT_SCHEMES:
                self.problem((*path, "source"), f"{redact_url(source)!r}: herder fetches artifacts over "
                                                f"{', '.join(ARTIFACT_SCHEMES)} and git:: only")
            for key in sorted(set(options) - {"checksum", "archive"}):
                self.problem((*path, "options", key), "unknown option (herder knows checksum and archive, and "
                                                      "ref, depth and sshkey for git:: sources)")
            if "checksum" in options:
                problem = checksum_problem(options["checksum"])
                if problem:
                    self.problem((*path, "options", "checksum"), problem)
            if options.get("archive", "true") not in ("true", "false"):
                self.problem((*path, "options", "archive"), "must be true or false")
        artifact = Artifact(
            source=source,
            destination=spec.get("destination", "local/"),
            mode=spec.get("mode", "any"),
            options=options,
            headers=texts(spec.get("headers")),
        )
        self.confined(artifact.destination, (*path, "destination"))
        return artifact

    def git_artifact(self, url: str, options: dict[str, str], mode: str, path: Path) -> None:
        """Check a ``git::URL`` source (``url`` without ``git::``) and go-getter's git options."""
        scheme = url.split("://", 1)[0] if "://" in url else url.split("::", 1)[0] if "::" in url else ""
        if "${" not in scheme and scheme.lower() not in GIT_SCHEMES:
            self.problem((*path, "source"), f"{redact_url(f'git::{url}')!r}: git sources are fetched over "
                                            f"{', '.join(f'{s}://' for s in GIT_SCHEMES)} only")
        for key in sorted(set(options) - set(GIT_OPTIONS)):
            self.problem((*path, "options", key), f"unknown option of a git:: source (herder knows "
                                                  f"{', '.join(GIT_OPTIONS)})")
        depth = options.get("depth", "0")
        if "${" not in depth and not depth.isdigit():
            self.problem((*path, "options", "depth"), f"{depth!r} must be a number of commits")
        ref = options.get("ref", "")
        if ref.startswith("-") or any(c.isspace() or c in ":*?[\\" for c in ref):
            self.problem((*path, "options", "ref"), f"{ref!r} is not a branch, tag or commit")
        sshkey = options.get("sshkey", "")
        if sshkey and "${" not in sshkey:
            try:
                base64.b64decode(sshkey, validate=True)
            except ValueError:
                self.problem((*path, "options", "sshkey"), "must be a base64-encoded private key")
        if mode == "file":
            self.problem((*path, "mode"), "a git:: source is a directory (mode any or dir)")

    def template(self, spec: dict[str, Any], path: Path) -> Template:
        if "data" not in spec and "source" not in spec:
            self.problem(path, "needs data or source")
        template = Template(
            destination=spec["destination"],
            data=spec.get("data", ""),
            source=spec.get("source", ""),
            change_mode=spec.get("change_mode", "restart"),
            change_signal=spec.get("change_signal", ""),
            perms=spec.get("perms", "0640"),
            left_delimiter=spec.get("left_delimiter", "{{"),
            right_delimiter=spec.get("right_delimiter", "}}"),
            splay=duration(spec, "splay", 5.0),
            env=spec.get("env", False),
        )
        self.confined(template.destination, (*path, "destination"))
        if template.source:
            self.confined(template.source, (*path, "source"))
        return template


ARTIFACT_SCHEMES = ("http", "https", "file")
GIT_SCHEMES = ("https", "http", "ssh", "file")
"""The transports of a ``git::`` source; ``file`` only under ``[plugin.artifacts] file_dirs``."""
GIT_OPTIONS = ("ref", "depth", "sshkey")
"""go-getter's options of a git source, in its URL's query or the stanza's ``options``."""
CHECKSUM_LENGTHS = {"md5": 32, "sha1": 40, "sha256": 64, "sha512": 128}


def checksum_problem(checksum: str) -> str:
    """What is wrong with an artifact checksum (``TYPE:HEX``), or ""."""
    if "${" in checksum:
        return ""
    kind, _, digest = checksum.partition(":")
    if kind not in CHECKSUM_LENGTHS:
        return f"{checksum!r} must be TYPE:HEX with TYPE one of {', '.join(CHECKSUM_LENGTHS)}"
    if len(digest) != CHECKSUM_LENGTHS[kind] or any(c not in "0123456789abcdefABCDEF" for c in digest):
        return f"a {kind} checksum is {CHECKSUM_LENGTHS[kind]} hexadecimal digits"
    return ""


def payload_file_problem(value: str) -> str:
    """What is wrong with ``value`` as the file (under ``local/``) a dispatch payload is written to; "" if nothing."""
    parts = PurePosixPath(value).parts
    if PurePosixPath(value).is_absolute():
        return f"{value!r} must be relative to the task's local/ directory"
    if ".." in parts:
        return f"{value!r} must stay inside the task's local/ directory (no '..')"
    if not parts or value.endswith("/") or "\0" in value:
        return f"{value!r} must name a file"
    return ""
