"""The API's request and response bodies: what ``/v1/openapi.json`` documents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_EXEC_TIMEOUT = 3600.0


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Error(_Model):
    """Every error: a message, and for an invalid job each problem with its path."""

    error: str
    errors: list[str] = Field(default_factory=list)


class Health(_Model):
    status: Literal["ok", "draining"]
    version: str
    node: str
    allocations: int


class Driver(_Model):
    name: str
    distribution: str
    version: str
    detected: bool
    healthy: bool
    description: str
    attributes: dict[str, str]


class Drivers(_Model):
    drivers: list[Driver]


class Plugin(_Model):
    name: str
    kind: str
    status: str
    distribution: str
    version: str
    entry_point: str
    hooks: list[str]
    error: str | None


class Plugins(_Model):
    plugins: list[Plugin]


class JobSubmit(_Model):
    """A job file's text in one of the formats, or a job as canonical JSON (``job``)."""

    text: str | None = Field(default=None, description="The job file's text (with ``format``).")
    format: Literal["hcl", "json", "yaml"] = "hcl"
    job: dict[str, Any] | None = Field(default=None, description="The job as canonical JSON, instead of text.")
    variables: dict[str, str] = Field(default_factory=dict, description="Job variables, as --var KEY=VALUE.")
    source: str = Field(default="api", max_length=4096,
                        description="Where the job came from, for messages only: the agent reads no file for a job.")
    lines: dict[str, int] = Field(default_factory=dict, max_length=100_000,
                                  description="For a job evaluated from a file (``herder job run``): the line of "
                                              "each path (``job.groups[0].name``) in that file, for messages.")


class TaskSummary(_Model):
    state: Literal["pending", "running", "dead"]
    failed: bool
    restarts: int
    exit_code: int | None


class AllocSummary(_Model):
    id: str
    name: str
    job: str
    group: str
    status: str
    tasks: dict[str, TaskSummary]


class ChildSummary(_Model):
    name: str
    status: str


class PeriodicStatus(_Model):
    """A periodic job's schedule, as its ``periodic`` block says, and its launches."""

    crons: list[str]
    time_zone: str
    prohibit_overlap: bool
    enabled: bool
    next_launch: str | None = Field(description="RFC 3339; null when it launches no more (stopped, disabled, or "
                                                "its crons match no later time).")
    last_launch: str | None = Field(description="RFC 3339: the scheduled time of its latest child, null before one.")


class Job(_Model):
    name: str
    id: str
    type: str = Field(description="The job's type: service, batch or system.")
    status: str
    allocations: list[AllocSummary]
    parameterized: bool = Field(default=False, description="Registered, not run: each dispatch runs a child of it.")
    parent_id: str = Field(default="", description="The periodic or parameterized job this one was launched or "
                                                   "dispatched from; \"\" if none.")
    periodic: PeriodicStatus | None = Field(default=None, description="A periodic job's schedule: it is registered, "
                                                                      "not run, and has no allocations of its own.")
    children: list[ChildSummary] = Field(default_factory=list,
                                         description="The children the agent knows of, oldest first.")


class JobSubmitted(Job):
    warnings: list[str]
    index: int = Field(description="The event stream's index before the submission: "
                                   "GET /v1/events?index= from it sees every event of the job.")


class DispatchRequest(_Model):
    """A dispatch of a parameterized job, as Nomad's (``Meta``, ``Payload``)."""

    meta: dict[str, str] = Field(default_factory=dict, description="Meta the job declares (meta_required, "
                                                                   "meta_optional); the tasks see NOMAD_META_<KEY>.")
    payload: str = Field(default="", description="The payload, base64 (at most 16 KiB decoded); written to "
                                                 "local/<file> of each task with a dispatch_payload.")


class JobDispatched(Job):
    """The child dispatched: an ordinary job, named ``PARENT/dispatch-<unix seconds>-<8 hex>``."""

    parent: str


class Jobs(_Model):
    jobs: list[Job]


class Allocations(_Model):
    allocations: list[AllocSummary]


class Event(_Model):
    time: str
    alloc_id: str
    alloc_name: str
    task: str
    type: str
    message: str
    details: dict[str, Any]


class Check(_Model):
    service: str
    check: str
    status: str
    output: str


class Port(_Model):
    label: str
    value: int
    to: int | None
    host_ip: str


class TaskStatus(TaskSummary):
    driver: str
    events: list[Event]
    checks: list[Check]


class RescheduleEvent(_Model):
    time: str
    previous: str = Field(description="The allocation this replacement replaced")
    delay: float = Field(description="Seconds the replacement waited after the failure")


class Reschedule(_Model):
    """How an allocation stands with its group's ``reschedule`` policy."""

    attempted: int = Field(description="Reschedules within the policy's interval (0 when unlimited)")
    attempts: int = Field(description="Reschedules the policy allows in its interval (0: unlimited)")
    events: list[RescheduleEvent] = Field(description="The reschedules that led to this allocation, oldest first")
    next_at: str | None = Field(description="When this failed allocation's replacement is placed, if one is due")


class Allocation(_Model):
    id: str
    name: str
    job: str
    job_id: str
    group: str
    index: int
    status: str
    ports: list[Port]
    tasks: dict[str, TaskStatus]
    previous_allocation: str = Field("", description="The allocation this one replaces (rescheduled or updated)")
    next_allocation: str = Field("", description="The allocation that replaced this one")
    reschedule: Reschedule


class TaskUsage(_Model):
    """A task's resource usage (``herder.TaskStats``): a figure its driver does not know is null."""

    state: str
    driver: str
    memory_rss_bytes: int | None = Field(None, description="Resident memory of the task's processes")
    memory_usage_bytes: int | None = Field(None, description="The task cgroup's memory usage, page cache included")
    memory_limit_bytes: int | None = Field(None, description="The task cgroup's memory limit")
    cpu_total_ns: int | None = Field(None, description="CPU time used (user and system) since the task started")
    cpu_percent: float | None = Field(None, description="CPU since the previous sample, 100 per busy core")
    cpu_throttled_periods: int | None = Field(None, description="CFS periods in which the cgroup was throttled")
    cpu_throttled_ns: int | None = Field(None, description="Time the cgroup was throttled")
    pids: int | None = Field(None, description="How many processes the task has")


class AllocationStats(_Model):
    id: str
    name: str
    tasks: dict[str, TaskUsage]


class ExecRequest(_Model):
    task: str
    command: list[str] = Field(min_length=1)
    timeout: float = Field(default=30.0, gt=0, le=MAX_EXEC_TIMEOUT)


class ExecResponse(_Model):
    exit_code: int
    output: str = Field(description="stdout and stderr together, at most 64 KiB (undecodable bytes replaced).")


class SignalRequest(_Model):
    task: str | None = Field(default=None, description="One task; every running task when omitted.")
    signal: str = Field(default="SIGTERM", max_length=32)


class RestartRequest(_Model):
    task: str | None = Field(default=None, description="One task; every running task when omitted.")
    reason: str = Field(default="", max_length=1024)


class Done(_Model):
    """An action was accepted."""

    message: str


class Collected(_Model):
    """What a garbage collection removed: the finished allocations (by ID) and the jobs purged whole."""

    message: str
    allocations: list[str]
    jobs: list[str]


class Version(_Model):
    version: int
    job_id: str = Field(description="The submission (a hash of the job file as submitted).")
    submitted_at: float = Field(description="Unix seconds.")
    stable: bool = Field(description="A deployment of it succeeded (or it needed none): auto_revert's target.")
    counts: dict[str, int] = Field(description="Group counts a scale set over the file's.")
    changes: list[str] = Field(description="What changed from the version before, one field a line: "
                                           "`+ path: value`, `- path: value`, `~ path: old -> new`.")


class Versions(_Model):
    versions: list[Version] = Field(description="Newest first.")


class RevertRequest(_Model):
    version: int = Field(ge=0)


class ScaleRequest(_Model):
    group: str = Field(min_length=1, max_length=256)
    count: int = Field(ge=0, le=1000)


class DeploymentGroup(_Model):
    desired_total: int
    desired_canaries: int
    promoted: bool
    placed: int
    healthy: int
    unhealthy: int
    canaries: list[str]
    progress_by: float | None = Field(description="Unix seconds by which an allocation must turn healthy; "
                                                  "null for no progress deadline.")


class Deployment(_Model):
    id: str
    job: str
    version: int
    status: Literal["running", "paused", "successful", "failed", "cancelled"]
    description: str
    groups: dict[str, DeploymentGroup]
    allocations: dict[str, bool | None] = Field(description="Each allocation placed, with its health "
                                                            "(null while not known).")


class Deployments(_Model):
    deployments: list[Deployment] = Field(description="Newest first.")


class PromoteRequest(_Model):
    groups: list[str] = Field(default_factory=list, description="The groups to promote; every one if none.")


class HealthRequest(_Model):
    healthy: list[str] = Field(default_factory=list, description="Allocation IDs.")
    unhealthy: list[str] = Field(default_factory=list, description="Allocation IDs.")


class ServiceStub(_Model):
    name: str
    tags: list[str]


class Services(_Model):
    """The native services (``provider = "nomad"``, and those of the embedded backend): each name with its
    instances' tags."""

    services: list[ServiceStub]


class ServiceInstance(_Model):
    id: str
    job: str
    alloc_id: str
    address: str
    port: int
    tags: list[str]


class Service(_Model):
    name: str
    instances: list[ServiceInstance]
