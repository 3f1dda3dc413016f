"""The job model: what a job file says, after defaults and validation.

These are plain dataclasses built by :func:`herder.jobspec.load_job`; durations
are seconds (floats), sizes are MB, as in the job file reference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class PortSpec:
    """A port a task asks for: dynamic when ``static`` is None."""

    label: str
    static: int | None = None
    to: int | None = None


@dataclass(frozen=True)
class NetworkDNS:
    """A group network's ``dns`` block: the ``resolv.conf`` of the allocation's namespace."""

    servers: tuple[str, ...] = ()
    searches: tuple[str, ...] = ()
    options: tuple[str, ...] = ()


HOST_NETWORK = "host"
ISOLATED_NETWORK_MODES = ("bridge", "none")
"""The modes that give an allocation a network namespace of its own, besides ``cni/NAME``."""


@dataclass(frozen=True)
class GroupNetwork:
    """A group's ``network`` block beyond its ports: ``mode`` is ``host``, ``bridge``, ``none`` or
    ``cni/NAME``; ``hostname`` and ``dns`` are the namespace's ("" and None: the defaults)."""

    mode: str = HOST_NETWORK
    hostname: str = ""
    dns: NetworkDNS | None = None

    @property
    def isolated(self) -> bool:
        """Whether the allocation gets a network namespace of its own, which its tasks share."""
        return self.mode in ISOLATED_NETWORK_MODES or self.mode.startswith("cni/")


@dataclass(frozen=True)
class Resources:
    """``memory_max`` is Nomad's oversubscription limit (MB): 0 when unset, -1
    for no limit, else at least ``memory``; drivers that can make it the hard
    limit, with ``memory`` the reservation."""

    cpu: int = 100
    memory: int = 300
    ports: tuple[PortSpec, ...] = ()
    memory_max: int = 0
    disk: int = 0
    """MB; Nomad's ``resources.disk`` of before ``ephemeral_disk``, which adds up to the group's
    ``ephemeral_disk.size`` when the group gives none."""
    cores: int = 0
    """Whole CPUs reserved for the task alone (Nomad's ``cores``); 0 for none. Drivers that can pin
    a task to CPUs (a cpuset) pin it to the ones herder reserved for it."""


@dataclass(frozen=True)
class Constraint:
    """A ``constraint`` block as Nomad's ``structs.Constraint``: ``attribute`` (LTarget) and
    ``value`` (RTarget) are literals or ``${...}`` references to the node, ``operator`` (Operand)
    one of Nomad's (``=`` when the job gives none)."""

    attribute: str = ""
    operator: str = "="
    value: str = ""

    def __str__(self) -> str:
        """Nomad's ``Constraint.String()``: how a plan names the constraint that filtered a node."""
        return f"{self.attribute} {self.operator} {self.value}"


@dataclass(frozen=True)
class CheckRestart:
    limit: int = 0
    grace: float = 1.0
    ignore_warnings: bool = False


@dataclass(frozen=True)
class Check:
    type: str
    name: str = ""
    interval: float = 10.0
    timeout: float = 2.0
    path: str = ""
    method: str = "GET"
    protocol: str = "http"
    port: str = ""
    command: str = ""
    args: tuple[str, ...] = ()
    address_mode: str = "host"
    header: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tls_skip_verify: bool = False
    initial_status: str = ""
    grpc_service: str = ""
    grpc_use_tls: bool = False
    check_restart: CheckRestart | None = None
    task: str = ""
    """The task a group service's script check runs in."""
    expose: bool = False
    """Connect: the sidecar proxy exposes the check's path on a port of its own (``check { expose = true }``),
    so that Consul reaches an HTTP or gRPC check of a service that listens only inside its namespace."""


@dataclass(frozen=True)
class Upstream:
    """A service of the mesh the sidecar proxy listens for inside the namespace, on
    ``local_bind_address:local_bind_port``."""

    destination_name: str
    local_bind_port: int
    local_bind_address: str = "127.0.0.1"
    datacenter: str = ""


@dataclass(frozen=True)
class ExposePath:
    """A path of the service the sidecar proxy serves without mutual TLS on ``listener_port`` (a port label
    of the group), for checks and metrics scrapers outside the mesh."""

    path: str
    local_path_port: int
    """0: the port the service listens on inside the namespace (known once its ports are allocated)."""
    listener_port: str
    protocol: str = "http"


@dataclass(frozen=True)
class ConnectProxy:
    """A sidecar service's ``proxy`` block; ``local_service_port`` 0 is the service's own port inside
    the namespace. ``config`` is handed to the proxy as it is (Consul's ``Proxy.Config``)."""

    local_service_address: str = "127.0.0.1"
    local_service_port: int = 0
    upstreams: tuple[Upstream, ...] = ()
    expose: tuple[ExposePath, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SidecarService:
    """A ``sidecar_service`` block: the proxy's own service, on the group port ``port``."""

    port: str
    tags: tuple[str, ...] = ()
    proxy: ConnectProxy = field(default_factory=ConnectProxy)
    disable_default_tcp_check: bool = False


@dataclass(frozen=True)
class Connect:
    """A group service's ``connect`` block: a sidecar proxy (``sidecar``, run by the task named
    ``sidecar_task``), or a service that speaks Connect itself (``native``)."""

    native: bool = False
    sidecar: SidecarService | None = None
    sidecar_task: str = ""
    """The name of the group's task that runs the sidecar proxy ("" for a native service)."""


@dataclass(frozen=True)
class Service:
    name: str
    port: str = ""
    tags: tuple[str, ...] = ()
    address_mode: str = "auto"
    meta: dict[str, str] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    provider: str = ""
    """Where the service is registered: ``nomad`` (the embedded registry), ``consul``, or ""
    (the agent's ``services.backend``)."""
    connect: Connect | None = None


@dataclass(frozen=True)
class Artifact:
    """What to download before the task starts; ``options`` holds ``checksum``
    (``TYPE:HEX``) and ``archive`` (``"false"`` keeps an archive packed)."""

    source: str
    destination: str = "local/"
    mode: str = "any"  # any | file | dir
    options: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    destination: str
    data: str = ""
    source: str = ""
    change_mode: str = "restart"
    change_signal: str = ""
    perms: str = "0640"
    """Octal, at most 0777: not world-readable unless the job says so."""
    left_delimiter: str = "{{"
    right_delimiter: str = "}}"
    splay: float = 5.0
    """At most this many seconds (a random share of it) pass between a re-render and its change_mode."""
    env: bool = False
    """The rendered file's ``KEY=value`` lines join the task's environment."""


DEFAULT_IDENTITY = "default"
"""The name of a task's own workload identity, the one Nomad's API takes (Nomad's ``WorkloadIdentityDefaultName``)."""


@dataclass(frozen=True)
class Identity:
    """A task's ``identity`` block (Nomad 1.7's workload identity): a JWT the agent signs for the task,
    in ``secrets/`` (``file``) and the environment (``env``). ``ttl`` in seconds, 0 for no expiry."""

    name: str = DEFAULT_IDENTITY
    audience: tuple[str, ...] = ()
    env: bool = False
    file: bool = False
    filepath: str = ""
    """Where (relative to the task directory) ``file`` writes the token; "" for Nomad's place under ``secrets/``."""
    ttl: float = 0.0


@dataclass(frozen=True)
class Scaling:
    """A group's ``scaling`` block: the bounds of its ``count`` (``job scale``). ``policy`` is the
    autoscaler's and means nothing to herder (there is no autoscaler)."""

    min: int
    max: int
    enabled: bool = True
    policy: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LogConfig:
    max_files: int = 10
    max_file_size: int = 10  # MB


@dataclass(frozen=True)
class RestartPolicy:
    attempts: int
    interval: float
    delay: float
    mode: str  # "fail" | "delay"


DELAY_FUNCTIONS = ("constant", "exponential", "fibonacci")


@dataclass(frozen=True)
class ReschedulePolicy:
    """A group's ``reschedule`` block over its job's and its job type's defaults (Nomad's
    ``ReschedulePolicy``): when a failed allocation is replaced. Durations in seconds."""

    attempts: int = 0
    """Replacements within ``interval``; ignored when ``unlimited``."""
    interval: float = 0.0
    delay: float = 0.0
    """The first replacement's delay; ``delay_function`` makes the next ones'."""
    delay_function: str = "constant"  # one of DELAY_FUNCTIONS
    max_delay: float = 0.0
    """The longest delay (not for ``constant``); 0 is no bound."""
    unlimited: bool = False
    given: bool = field(default=False, compare=False)
    """Whether the job file has a ``reschedule`` block for the group (the job's or its own), rather
    than only its type's default: ``herder run`` in the foreground reschedules only then."""

    @property
    def enabled(self) -> bool:
        return self.attempts > 0 or self.unlimited


@dataclass(frozen=True)
class EphemeralDisk:
    """A group's ``ephemeral_disk`` block: whether a replacement allocation starts with the
    ``alloc/data`` of the one it replaces (``sticky``; ``migrate`` asks the same on one host)."""

    size: int = 300  # MB, as Nomad's default; herder does not enforce it
    sticky: bool = False
    migrate: bool = False

    @property
    def carried(self) -> bool:
        return self.sticky or self.migrate


@dataclass(frozen=True)
class Update:
    """A group's ``update`` block, after the job's and Nomad's defaults (seconds): how a new
    version replaces its allocations, and when a deployment of it is healthy or failed."""

    max_parallel: int = 1
    """How many old allocations are replaced at a time; 0 replaces them all at once, with no deployment."""
    health_check: str = "checks"  # "checks" | "task_states" | "manual"
    min_healthy_time: float = 10.0
    healthy_deadline: float = 300.0
    progress_deadline: float = 600.0
    """0 for none: then the first unhealthy allocation fails the deployment."""
    auto_revert: bool = False
    auto_promote: bool = False
    canary: int = 0
    stagger: float = 30.0


@dataclass(frozen=True)
class VolumeRequest:
    """A group's ``volume "NAME"`` block: a host volume of the node (``source``, as the client
    configuration names it) that the group's tasks may mount. With ``per_alloc`` each allocation
    gets its own: ``source[INDEX]``, as in Nomad."""

    name: str
    source: str
    type: str = "host"
    read_only: bool = False
    access_mode: str = ""
    attachment_mode: str = ""
    per_alloc: bool = False

    def source_for(self, index: int) -> str:
        """The host volume the allocation of ``index`` mounts."""
        return f"{self.source}[{index}]" if self.per_alloc else self.source


PROPAGATION_MODES = ("private", "host-to-task", "bidirectional")


@dataclass(frozen=True)
class VolumeMount:
    """A task's ``volume_mount`` block: the group volume ``volume`` at ``destination`` (absolute)."""

    volume: str
    destination: str
    read_only: bool = False
    propagation_mode: str = "private"  # one of PROPAGATION_MODES


PRESTART, POSTSTART, POSTSTOP = "prestart", "poststart", "poststop"


@dataclass(frozen=True)
class Lifecycle:
    """A task's ``lifecycle`` block: when it runs relative to the main tasks of its group."""

    hook: str  # PRESTART | POSTSTART | POSTSTOP
    sidecar: bool = False


@dataclass
class Task:
    """A task as the job file gives it, after defaults and validation.

    ``kill_signal`` is the signal name given in the job file, or "" for the
    driver's default (SIGTERM for docker, SIGINT otherwise). ``restart`` is set
    when the task has a restart block of its own (applied over its group's
    policy, as in Nomad); None means the group's policy applies.
    """

    name: str
    driver: str
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    user: str = ""
    leader: bool = False
    kill_timeout: float = 5.0
    kill_signal: str = ""
    shutdown_delay: float = 0.0
    meta: dict[str, str] = field(default_factory=dict)
    resources: Resources = field(default_factory=Resources)
    services: tuple[Service, ...] = ()
    artifacts: tuple[Artifact, ...] = ()
    templates: tuple[Template, ...] = ()
    logs: LogConfig = field(default_factory=LogConfig)
    restart: RestartPolicy | None = None
    lifecycle: Lifecycle | None = None
    dispatch_payload: str = ""
    """Where (under ``local/``) the payload of a dispatched job is written; "" for nowhere."""
    constraints: tuple[Constraint, ...] = ()
    volume_mounts: tuple[VolumeMount, ...] = ()
    identities: tuple[Identity, ...] = ()
    kind: str = ""
    """What the task is to herder besides a task of the job, as Nomad's ``Kind``: ``connect-proxy:SERVICE``
    for the sidecar proxy of a Connect service (the task herder adds, or its ``sidecar_task``), ""
    for an ordinary task."""

    @property
    def is_main(self) -> bool:
        return self.lifecycle is None

    @property
    def is_sidecar(self) -> bool:
        """A prestart or poststart task that runs beside the main tasks (a poststop
        task is never one: it runs after them)."""
        return self.lifecycle is not None and self.lifecycle.sidecar and self.lifecycle.hook != POSTSTOP


@dataclass
class Group:
    name: str
    count: int
    restart: RestartPolicy
    tasks: list[Task]
    meta: dict[str, str] = field(default_factory=dict)
    ports: tuple[PortSpec, ...] = ()  # group-level network: shared by the group's tasks
    network: GroupNetwork = field(default_factory=GroupNetwork)
    services: tuple[Service, ...] = ()  # Nomad 1.x group services, on the group's ports
    reschedule: ReschedulePolicy | None = None  # None: never rescheduled (system jobs)
    ephemeral_disk: EphemeralDisk = field(default_factory=EphemeralDisk)
    update: Update | None = None
    """How a new version replaces the group's allocations; None for a job type that has no
    deployments (batch, sysbatch, system): they are replaced all at once."""
    constraints: tuple[Constraint, ...] = ()
    volumes: tuple[VolumeRequest, ...] = ()
    max_run_duration: float = 0.0
    """Seconds an allocation may run from its creation before its tasks are killed; 0 for no limit."""
    scaling: Scaling | None = None

    @property
    def upstreams(self) -> tuple[Upstream, ...]:
        """The Connect upstreams of every sidecar of the group: every task of it reaches them."""
        return tuple(upstream for service in self.services
                     if service.connect is not None and service.connect.sidecar is not None
                     for upstream in service.connect.sidecar.proxy.upstreams)


@dataclass(frozen=True)
class Periodic:
    """A job's ``periodic`` block: the job is registered, not run, and a child
    of it is launched at each time of ``crons`` (cron expressions as Nomad
    reads them), read as wall times in ``time_zone`` (IANA)."""

    crons: tuple[str, ...]
    prohibit_overlap: bool = False
    """Skip a launch while a child launched before still runs."""
    time_zone: str = "UTC"
    enabled: bool = True


PAYLOAD_OPTIONAL, PAYLOAD_REQUIRED, PAYLOAD_FORBIDDEN = "optional", "required", "forbidden"
MAX_PAYLOAD = 16 * 1024
"""The largest dispatch payload, in bytes (Nomad's limit)."""


@dataclass(frozen=True)
class Parameterized:
    """A job's ``parameterized`` block: the job is registered, not run, and
    dispatched with meta (the keys ``meta_required`` and ``meta_optional``
    name, no others) and a payload (``payload``: optional, required or forbidden)."""

    payload: str = PAYLOAD_OPTIONAL
    meta_required: tuple[str, ...] = ()
    meta_optional: tuple[str, ...] = ()


@dataclass
class Job:
    """A whole job file. ``source`` names the file and ``lines`` maps rendered
    paths (``job.groups[0].tasks[1]``) to their lines in it, so that later
    checks can point at the file too; neither takes part in equality."""

    name: str
    type: str  # "service" | "batch" | "system" | "sysbatch"
    groups: list[Group]
    datacenters: list[str] = field(default_factory=lambda: ["dc1"])
    region: str = "global"
    meta: dict[str, str] = field(default_factory=dict)
    periodic: Periodic | None = None
    parameterized: Parameterized | None = None
    parent_id: str = ""
    """The job this one was launched or dispatched from; "" for a job of its own."""
    payload: bytes = b""
    """A dispatched job's payload, written for each task that has a ``dispatch_payload``."""
    constraints: tuple[Constraint, ...] = ()
    warnings: list[str] = field(default_factory=list)
    source: str = field(default="", compare=False)
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def runs_itself(self) -> bool:
        """False for a periodic or parameterized job: it is registered, and only its children run."""
        return self.periodic is None and self.parameterized is None

    @property
    def launches(self) -> bool:
        """Whether the job launches children on a schedule: periodic and enabled, and
        not parameterized (as Nomad, a job both launches only once dispatched)."""
        return self.periodic is not None and self.periodic.enabled and self.parameterized is None
