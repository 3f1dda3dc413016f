"""Nomad's API structures, as the ``api`` package of Nomad 1.1 names them, for what this API serves.

Field names are Nomad's (capitalised); every field has Nomad's zero value, so that
what herder has no notion of reads as a Nomad without that feature would answer.
Times are RFC 3339 (Go's ``time.Time``), durations nanoseconds, as on Nomad's wire.
Job documents are passed through as Nomad JSON (``dict``): they are the user's own.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

ZERO_TIME = "0001-01-01T00:00:00Z"
"""Go's zero ``time.Time``, as Nomad writes a time that never was."""


# Many of Nomad's fields have the name of their type (``Resources: Resources``): such a field is
# annotated with the type's other name (``_Resources``), which its class body does not hide.


class Nomad(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Port(Nomad):
    """A port of a :class:`NetworkResource`: ``Value`` on the host, ``To`` in the task (0: the same)."""

    Label: str = ""
    Value: int = 0
    To: int = 0
    HostNetwork: str = "default"


class NetworkResource(Nomad):
    Mode: str = ""
    Device: str = ""
    CIDR: str = ""
    IP: str = ""
    MBits: int = 0
    DNS: dict[str, Any] | None = None
    ReservedPorts: list[Port] | None = None
    DynamicPorts: list[Port] | None = None


class Resources(Nomad):
    CPU: int = 0
    """MHz."""
    Cores: int = 0
    MemoryMB: int = 0
    MemoryMaxMB: int = 0
    DiskMB: int = 0
    Networks: list[NetworkResource] | None = None

_Resources = Resources


class MemoryStats(Nomad):
    RSS: int = 0
    Cache: int = 0
    Swap: int = 0
    Usage: int = 0
    MaxUsage: int = 0
    KernelUsage: int = 0
    KernelMaxUsage: int = 0
    Measured: list[str] | None = None

_MemoryStats = MemoryStats


class CpuStats(Nomad):
    SystemMode: float = 0.0
    UserMode: float = 0.0
    TotalTicks: float = 0.0
    ThrottledPeriods: int = 0
    ThrottledTime: int = 0
    Percent: float = 0.0
    Measured: list[str] | None = None

_CpuStats = CpuStats


class ResourceUsage(Nomad):
    MemoryStats: _MemoryStats = Field(default_factory=_MemoryStats)
    CpuStats: _CpuStats = Field(default_factory=_CpuStats)
    DeviceStats: list[dict[str, Any]] | None = None

_ResourceUsage = ResourceUsage


class TaskResourceUsage(Nomad):
    ResourceUsage: _ResourceUsage = Field(default_factory=_ResourceUsage)
    Timestamp: int = 0
    Pids: dict[str, _ResourceUsage] | None = None


class AllocResourceUsage(Nomad):
    ResourceUsage: _ResourceUsage = Field(default_factory=_ResourceUsage)
    Tasks: dict[str, TaskResourceUsage] = Field(default_factory=dict)
    Timestamp: int = 0


class HostMemoryStats(Nomad):
    Total: int = 0
    Available: int = 0
    Used: int = 0
    Free: int = 0


class HostDiskStats(Nomad):
    Device: str = ""
    Mountpoint: str = ""
    Size: int = 0
    Used: int = 0
    Available: int = 0
    UsedPercent: float = 0.0
    InodesUsedPercent: float = 0.0


class HostStats(Nomad):
    Memory: HostMemoryStats = Field(default_factory=HostMemoryStats)
    CPU: list[dict[str, Any]] = Field(default_factory=list)
    DiskStats: list[HostDiskStats] = Field(default_factory=list)
    DeviceStats: list[dict[str, Any]] = Field(default_factory=list)
    Uptime: int = 0
    CPUTicksConsumed: float = 0.0
    Timestamp: int = 0


class TaskEvent(Nomad):
    Type: str = ""
    Time: int = 0
    """Unix nanoseconds."""
    DisplayMessage: str = ""
    Message: str = ""
    Details: dict[str, str] = Field(default_factory=dict)
    ExitCode: int = 0
    Signal: int = 0
    FailsTask: bool = False
    RestartReason: str = ""
    KillReason: str = ""
    KillError: str = ""
    DriverError: str = ""
    DriverMessage: str = ""
    SetupError: str = ""
    ValidationError: str = ""
    TaskSignal: str = ""
    TaskSignalReason: str = ""
    StartDelay: int = 0
    KillTimeout: int = 0
    DownloadError: str = ""
    VaultError: str = ""
    DiskLimit: int = 0
    DiskSize: int = 0
    FailedSibling: str = ""
    GenericSource: str = ""


class TaskState(Nomad):
    State: str = "pending"
    Failed: bool = False
    Restarts: int = 0
    LastRestart: str = ZERO_TIME
    StartedAt: str = ZERO_TIME
    FinishedAt: str = ZERO_TIME
    Events: list[TaskEvent] = Field(default_factory=list)


class AllocDeploymentStatus(Nomad):
    Healthy: bool | None = None
    Timestamp: str = ZERO_TIME
    Canary: bool = False
    ModifyIndex: int = 0


class AllocationMetric(Nomad):
    NodesEvaluated: int = 1
    NodesFiltered: int = 0
    NodesAvailable: dict[str, int] = Field(default_factory=dict)
    ClassFiltered: dict[str, int] | None = None
    ConstraintFiltered: dict[str, int] | None = None
    NodesExhausted: int = 0
    ClassExhausted: dict[str, int] | None = None
    DimensionExhausted: dict[str, int] | None = None
    QuotaExhausted: list[str] | None = None
    Scores: dict[str, float] | None = None
    ScoreMetaData: list[dict[str, Any]] | None = None
    AllocationTime: int = 0
    CoalescedFailures: int = 0


class AllocatedPortMapping(Nomad):
    """A port of the allocation as ``alloc status`` shows it under "Allocation Addresses"."""

    Label: str = ""
    Value: int = 0
    To: int = 0
    HostIP: str = ""


class AllocatedCpuResources(Nomad):
    CpuShares: int = 0
    ReservedCores: list[int] | None = None


class AllocatedMemoryResources(Nomad):
    MemoryMB: int = 0
    MemoryMaxMB: int = 0


class AllocatedTaskResources(Nomad):
    Cpu: AllocatedCpuResources = Field(default_factory=AllocatedCpuResources)
    Memory: AllocatedMemoryResources = Field(default_factory=AllocatedMemoryResources)
    Networks: list[NetworkResource] | None = None
    Devices: list[dict[str, Any]] | None = None


class AllocatedSharedResources(Nomad):
    Networks: list[NetworkResource] | None = None
    DiskMB: int = 0
    Ports: list[AllocatedPortMapping] | None = None


class AllocatedResources(Nomad):
    """What the allocation was given: each task's CPU, memory and ports, and the group's network and disk."""

    Tasks: dict[str, AllocatedTaskResources] = Field(default_factory=dict)
    TaskLifecycles: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    Shared: AllocatedSharedResources = Field(default_factory=AllocatedSharedResources)

_AllocatedResources = AllocatedResources


class RescheduleEvent(Nomad):
    RescheduleTime: int
    """Unix nanoseconds."""
    PrevAllocID: str
    PrevNodeID: str
    Delay: int
    """Nanoseconds."""


class RescheduleTracker(Nomad):
    Events: list[RescheduleEvent]
    LastReschedule: str = "ok"


_RescheduleTracker = RescheduleTracker


class AllocationListStub(Nomad):
    ID: str
    EvalID: str = ""
    Name: str = ""
    Namespace: str = "default"
    NodeID: str = ""
    NodeName: str = ""
    JobID: str = ""
    JobType: str = ""
    JobVersion: int = 0
    TaskGroup: str = ""
    DesiredStatus: str = "run"
    DesiredDescription: str = ""
    ClientStatus: str = "pending"
    ClientDescription: str = ""
    TaskStates: dict[str, TaskState] = Field(default_factory=dict)
    DeploymentStatus: AllocDeploymentStatus | None = None
    FollowupEvalID: str = ""
    RescheduleTracker: _RescheduleTracker | None = None
    PreemptedAllocations: list[str] | None = None
    PreemptedByAllocation: str = ""
    CreateIndex: int = 0
    ModifyIndex: int = 0
    CreateTime: int = 0
    ModifyTime: int = 0


class Allocation(AllocationListStub):
    Job: dict[str, Any] = Field(default_factory=dict)
    Resources: _Resources = Field(default_factory=_Resources)
    DeploymentID: str = ""
    Metrics: AllocationMetric = Field(default_factory=AllocationMetric)
    AllocatedResources: _AllocatedResources | None = None
    TaskResources: dict[str, _Resources] | None = None
    """Each task's resources, the shape ``alloc status`` of Nomad 1.1 reads for "Task Resources"."""
    SharedResources: _Resources | None = None
    Services: dict[str, str] | None = None
    PreviousAllocation: str = ""
    NextAllocation: str = ""
    AllocModifyIndex: int = 0


class Evaluation(Nomad):
    ID: str
    Priority: int = 50
    Type: str = "service"
    TriggeredBy: str = "job-register"
    Namespace: str = "default"
    JobID: str = ""
    JobModifyIndex: int = 0
    NodeID: str = ""
    NodeModifyIndex: int = 0
    DeploymentID: str = ""
    Status: str = "complete"
    StatusDescription: str = ""
    Wait: int = 0
    WaitUntil: str = ZERO_TIME
    NextEval: str = ""
    PreviousEval: str = ""
    BlockedEval: str = ""
    FailedTGAllocs: dict[str, AllocationMetric] | None = None
    ClassEligibility: dict[str, bool] | None = None
    EscapedComputedClass: bool = False
    QuotaLimitReached: str = ""
    AnnotatePlan: bool = False
    QueuedAllocations: dict[str, int] = Field(default_factory=dict)
    SnapshotIndex: int = 0
    CreateIndex: int = 0
    ModifyIndex: int = 0
    CreateTime: int = 0
    ModifyTime: int = 0


class DeploymentState(Nomad):
    PlacedCanaries: list[str] | None = None
    AutoRevert: bool = False
    AutoPromote: bool = False
    ProgressDeadline: int = 0
    RequireProgressBy: str = ZERO_TIME
    Promoted: bool = False
    DesiredCanaries: int = 0
    DesiredTotal: int = 0
    PlacedAllocs: int = 0
    HealthyAllocs: int = 0
    UnhealthyAllocs: int = 0


class Deployment(Nomad):
    ID: str
    Namespace: str = "default"
    JobID: str = ""
    JobVersion: int = 0
    JobModifyIndex: int = 0
    JobSpecModifyIndex: int = 0
    JobCreateIndex: int = 0
    IsMultiregion: bool = False
    TaskGroups: dict[str, DeploymentState] = Field(default_factory=dict)
    Status: str = "running"
    StatusDescription: str = ""
    CreateIndex: int = 0
    ModifyIndex: int = 0


class TaskGroupSummary(Nomad):
    Queued: int = 0
    Complete: int = 0
    Failed: int = 0
    Running: int = 0
    Starting: int = 0
    Lost: int = 0


class JobChildrenSummary(Nomad):
    Pending: int = 0
    Running: int = 0
    Dead: int = 0


class JobSummary(Nomad):
    JobID: str
    Namespace: str = "default"
    Summary: dict[str, TaskGroupSummary] = Field(default_factory=dict)
    Children: JobChildrenSummary = Field(default_factory=JobChildrenSummary)
    CreateIndex: int = 0
    ModifyIndex: int = 0

_JobSummary = JobSummary


class JobListStub(Nomad):
    ID: str
    ParentID: str = ""
    Name: str = ""
    Namespace: str = "default"
    Datacenters: list[str] = Field(default_factory=list)
    Type: str = "service"
    Priority: int = 50
    Periodic: bool = False
    ParameterizedJob: bool = False
    Stop: bool = False
    Status: str = "pending"
    StatusDescription: str = ""
    JobSummary: _JobSummary | None = None
    CreateIndex: int = 0
    ModifyIndex: int = 0
    JobModifyIndex: int = 0
    SubmitTime: int = 0


class JobVersions(Nomad):
    Versions: list[dict[str, Any]] = Field(default_factory=list)
    Diffs: list[dict[str, Any]] | None = None
    """With ``?diffs=true``: ``Diffs[i]`` is what changed from ``Versions[i + 1]`` to ``Versions[i]``."""


class JobRegisterRequest(BaseModel):
    """``PUT /v1/jobs`` and ``PUT /v1/job/:id``: the job in Nomad's JSON, and options herder has no use for."""

    model_config = ConfigDict(extra="ignore")
    Job: dict[str, Any]
    EnforceIndex: bool = False
    JobModifyIndex: int = 0
    PolicyOverride: bool = False
    PreserveCounts: bool = False


class JobValidateRequest(BaseModel):
    """``PUT /v1/validate/job``: a job in Nomad's JSON, checked and not run."""

    model_config = ConfigDict(extra="ignore")
    Job: dict[str, Any]


class JobValidateResponse(Nomad):
    DriverConfigValidated: bool = False
    ValidationErrors: list[str] | None = None
    Error: str = ""
    Warnings: str = ""


class JobParseRequest(BaseModel):
    """``POST /v1/jobs/parse``: a job file in HCL, to be given back in Nomad's JSON."""

    model_config = ConfigDict(extra="ignore")
    JobHCL: str
    Canonicalize: bool = False
    HCLv1: bool = False


class JobRegisterResponse(Nomad):
    EvalID: str = ""
    EvalCreateIndex: int = 0
    JobModifyIndex: int = 0
    Warnings: str = ""
    LastIndex: int = 0
    RequestTime: int = 0


class JobDeregisterResponse(Nomad):
    EvalID: str = ""
    EvalCreateIndex: int = 0
    JobModifyIndex: int = 0
    VolumeEvalID: str = ""
    VolumeEvalIndex: int = 0
    LastIndex: int = 0
    RequestTime: int = 0


class JobDispatchRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    JobID: str = ""
    Payload: str | None = None
    """Base64, as Go writes a ``[]byte``."""
    Meta: dict[str, str] | None = None


class JobDispatchResponse(Nomad):
    DispatchedJobID: str
    EvalID: str = ""
    EvalCreateIndex: int = 0
    JobCreateIndex: int = 0
    LastIndex: int = 0
    RequestTime: int = 0


class PeriodicForceResponse(Nomad):
    EvalID: str = ""
    EvalCreateIndex: int = 0
    LastIndex: int = 0
    RequestTime: int = 0


class DriverInfo(Nomad):
    Attributes: dict[str, str] = Field(default_factory=dict)
    Detected: bool = False
    Healthy: bool = False
    HealthDescription: str = ""
    UpdateTime: str = ZERO_TIME


class NodeListStub(Nomad):
    Address: str = ""
    ID: str
    Datacenter: str = ""
    Name: str = ""
    NodeClass: str = ""
    Version: str = ""
    Drain: bool = False
    SchedulingEligibility: str = "eligible"
    Status: str = "ready"
    StatusDescription: str = ""
    Drivers: dict[str, DriverInfo] = Field(default_factory=dict)
    CreateIndex: int = 0
    ModifyIndex: int = 0


class Node(NodeListStub):
    HTTPAddr: str = ""
    DrainStrategy: dict[str, Any] | None = None
    Resources: _Resources = Field(default_factory=_Resources)
    Reserved: _Resources = Field(default_factory=_Resources)
    TLSEnabled: bool = False
    Attributes: dict[str, str] = Field(default_factory=dict)
    Meta: dict[str, str] = Field(default_factory=dict)
    Links: dict[str, str] = Field(default_factory=dict)
    StatusUpdatedAt: int = 0
    Events: list[dict[str, Any]] = Field(default_factory=list)
    HostVolumes: dict[str, Any] = Field(default_factory=dict)
    CSIControllerPlugins: dict[str, Any] | None = None
    CSINodePlugins: dict[str, Any] | None = None


class AllocSignalRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    Task: str = ""
    Signal: str = "SIGKILL"


class AllocRestartRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    TaskName: str = ""
    AllTasks: bool = False


class AllocFileInfo(Nomad):
    """A name in an allocation directory (``/v1/client/fs/ls``, ``/stat``)."""

    Name: str
    IsDir: bool = False
    Size: int = 0
    FileMode: str = ""
    """Go's ``os.FileMode`` as text: ``-rw-r--r--``, ``drwxr-xr-x``, ``Lrwxrwxrwx`` for a link."""
    ModTime: str = ZERO_TIME
    ContentType: str = ""


class AllocStopResponse(Nomad):
    EvalID: str = ""
    Index: int = 0
