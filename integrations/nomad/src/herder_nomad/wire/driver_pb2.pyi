# ruff: noqa
# mypy: ignore-errors
import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from herder_nomad.wire import hcl_spec_pb2 as _hcl_spec_pb2
from herder_nomad.wire import attribute_pb2 as _attribute_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN: _ClassVar[TaskState]
    RUNNING: _ClassVar[TaskState]
    EXITED: _ClassVar[TaskState]
UNKNOWN: TaskState
RUNNING: TaskState
EXITED: TaskState

class TaskConfigSchemaRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TaskConfigSchemaResponse(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: _hcl_spec_pb2.Spec
    def __init__(self, spec: _Optional[_Union[_hcl_spec_pb2.Spec, _Mapping]] = ...) -> None: ...

class CapabilitiesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CapabilitiesResponse(_message.Message):
    __slots__ = ("capabilities",)
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: DriverCapabilities
    def __init__(self, capabilities: _Optional[_Union[DriverCapabilities, _Mapping]] = ...) -> None: ...

class FingerprintRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FingerprintResponse(_message.Message):
    __slots__ = ("attributes", "health", "health_description")
    class HealthState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNDETECTED: _ClassVar[FingerprintResponse.HealthState]
        UNHEALTHY: _ClassVar[FingerprintResponse.HealthState]
        HEALTHY: _ClassVar[FingerprintResponse.HealthState]
    UNDETECTED: FingerprintResponse.HealthState
    UNHEALTHY: FingerprintResponse.HealthState
    HEALTHY: FingerprintResponse.HealthState
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _attribute_pb2.Attribute
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_attribute_pb2.Attribute, _Mapping]] = ...) -> None: ...
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.MessageMap[str, _attribute_pb2.Attribute]
    health: FingerprintResponse.HealthState
    health_description: str
    def __init__(self, attributes: _Optional[_Mapping[str, _attribute_pb2.Attribute]] = ..., health: _Optional[_Union[FingerprintResponse.HealthState, str]] = ..., health_description: _Optional[str] = ...) -> None: ...

class RecoverTaskRequest(_message.Message):
    __slots__ = ("task_id", "handle")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    handle: TaskHandle
    def __init__(self, task_id: _Optional[str] = ..., handle: _Optional[_Union[TaskHandle, _Mapping]] = ...) -> None: ...

class RecoverTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StartTaskRequest(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: TaskConfig
    def __init__(self, task: _Optional[_Union[TaskConfig, _Mapping]] = ...) -> None: ...

class StartTaskResponse(_message.Message):
    __slots__ = ("result", "driver_error_msg", "handle", "network_override")
    class Result(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SUCCESS: _ClassVar[StartTaskResponse.Result]
        RETRY: _ClassVar[StartTaskResponse.Result]
        FATAL: _ClassVar[StartTaskResponse.Result]
    SUCCESS: StartTaskResponse.Result
    RETRY: StartTaskResponse.Result
    FATAL: StartTaskResponse.Result
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DRIVER_ERROR_MSG_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    NETWORK_OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    result: StartTaskResponse.Result
    driver_error_msg: str
    handle: TaskHandle
    network_override: NetworkOverride
    def __init__(self, result: _Optional[_Union[StartTaskResponse.Result, str]] = ..., driver_error_msg: _Optional[str] = ..., handle: _Optional[_Union[TaskHandle, _Mapping]] = ..., network_override: _Optional[_Union[NetworkOverride, _Mapping]] = ...) -> None: ...

class WaitTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class WaitTaskResponse(_message.Message):
    __slots__ = ("result", "err")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERR_FIELD_NUMBER: _ClassVar[int]
    result: ExitResult
    err: str
    def __init__(self, result: _Optional[_Union[ExitResult, _Mapping]] = ..., err: _Optional[str] = ...) -> None: ...

class StopTaskRequest(_message.Message):
    __slots__ = ("task_id", "timeout", "signal")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    timeout: _duration_pb2.Duration
    signal: str
    def __init__(self, task_id: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., signal: _Optional[str] = ...) -> None: ...

class StopTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DestroyTaskRequest(_message.Message):
    __slots__ = ("task_id", "force")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    force: bool
    def __init__(self, task_id: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...

class DestroyTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class InspectTaskRequest(_message.Message):
    __slots__ = ("task_id",)
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class InspectTaskResponse(_message.Message):
    __slots__ = ("task", "driver", "network_override")
    TASK_FIELD_NUMBER: _ClassVar[int]
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    NETWORK_OVERRIDE_FIELD_NUMBER: _ClassVar[int]
    task: TaskStatus
    driver: TaskDriverStatus
    network_override: NetworkOverride
    def __init__(self, task: _Optional[_Union[TaskStatus, _Mapping]] = ..., driver: _Optional[_Union[TaskDriverStatus, _Mapping]] = ..., network_override: _Optional[_Union[NetworkOverride, _Mapping]] = ...) -> None: ...

class TaskStatsRequest(_message.Message):
    __slots__ = ("task_id", "collection_interval")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    collection_interval: _duration_pb2.Duration
    def __init__(self, task_id: _Optional[str] = ..., collection_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class TaskStatsResponse(_message.Message):
    __slots__ = ("stats",)
    STATS_FIELD_NUMBER: _ClassVar[int]
    stats: TaskStats
    def __init__(self, stats: _Optional[_Union[TaskStats, _Mapping]] = ...) -> None: ...

class TaskEventsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SignalTaskRequest(_message.Message):
    __slots__ = ("task_id", "signal")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    signal: str
    def __init__(self, task_id: _Optional[str] = ..., signal: _Optional[str] = ...) -> None: ...

class SignalTaskResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecTaskRequest(_message.Message):
    __slots__ = ("task_id", "command", "timeout")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    command: _containers.RepeatedScalarFieldContainer[str]
    timeout: _duration_pb2.Duration
    def __init__(self, task_id: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ExecTaskResponse(_message.Message):
    __slots__ = ("stdout", "stderr", "result")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    result: ExitResult
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., result: _Optional[_Union[ExitResult, _Mapping]] = ...) -> None: ...

class ExecTaskStreamingIOOperation(_message.Message):
    __slots__ = ("data", "close")
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    close: bool
    def __init__(self, data: _Optional[bytes] = ..., close: _Optional[bool] = ...) -> None: ...

class ExecTaskStreamingRequest(_message.Message):
    __slots__ = ("setup", "tty_size", "stdin")
    class Setup(_message.Message):
        __slots__ = ("task_id", "command", "tty")
        TASK_ID_FIELD_NUMBER: _ClassVar[int]
        COMMAND_FIELD_NUMBER: _ClassVar[int]
        TTY_FIELD_NUMBER: _ClassVar[int]
        task_id: str
        command: _containers.RepeatedScalarFieldContainer[str]
        tty: bool
        def __init__(self, task_id: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., tty: _Optional[bool] = ...) -> None: ...
    class TerminalSize(_message.Message):
        __slots__ = ("height", "width")
        HEIGHT_FIELD_NUMBER: _ClassVar[int]
        WIDTH_FIELD_NUMBER: _ClassVar[int]
        height: int
        width: int
        def __init__(self, height: _Optional[int] = ..., width: _Optional[int] = ...) -> None: ...
    SETUP_FIELD_NUMBER: _ClassVar[int]
    TTY_SIZE_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    setup: ExecTaskStreamingRequest.Setup
    tty_size: ExecTaskStreamingRequest.TerminalSize
    stdin: ExecTaskStreamingIOOperation
    def __init__(self, setup: _Optional[_Union[ExecTaskStreamingRequest.Setup, _Mapping]] = ..., tty_size: _Optional[_Union[ExecTaskStreamingRequest.TerminalSize, _Mapping]] = ..., stdin: _Optional[_Union[ExecTaskStreamingIOOperation, _Mapping]] = ...) -> None: ...

class ExecTaskStreamingResponse(_message.Message):
    __slots__ = ("stdout", "stderr", "exited", "result")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXITED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    stdout: ExecTaskStreamingIOOperation
    stderr: ExecTaskStreamingIOOperation
    exited: bool
    result: ExitResult
    def __init__(self, stdout: _Optional[_Union[ExecTaskStreamingIOOperation, _Mapping]] = ..., stderr: _Optional[_Union[ExecTaskStreamingIOOperation, _Mapping]] = ..., exited: _Optional[bool] = ..., result: _Optional[_Union[ExitResult, _Mapping]] = ...) -> None: ...

class CreateNetworkRequest(_message.Message):
    __slots__ = ("alloc_id",)
    ALLOC_ID_FIELD_NUMBER: _ClassVar[int]
    alloc_id: str
    def __init__(self, alloc_id: _Optional[str] = ...) -> None: ...

class CreateNetworkResponse(_message.Message):
    __slots__ = ("isolation_spec", "created")
    ISOLATION_SPEC_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    isolation_spec: NetworkIsolationSpec
    created: bool
    def __init__(self, isolation_spec: _Optional[_Union[NetworkIsolationSpec, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class DestroyNetworkRequest(_message.Message):
    __slots__ = ("alloc_id", "isolation_spec")
    ALLOC_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_SPEC_FIELD_NUMBER: _ClassVar[int]
    alloc_id: str
    isolation_spec: NetworkIsolationSpec
    def __init__(self, alloc_id: _Optional[str] = ..., isolation_spec: _Optional[_Union[NetworkIsolationSpec, _Mapping]] = ...) -> None: ...

class DestroyNetworkResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DriverCapabilities(_message.Message):
    __slots__ = ("send_signals", "exec", "fs_isolation", "network_isolation_modes", "must_create_network", "mount_configs", "remote_tasks")
    class FSIsolation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NONE: _ClassVar[DriverCapabilities.FSIsolation]
        CHROOT: _ClassVar[DriverCapabilities.FSIsolation]
        IMAGE: _ClassVar[DriverCapabilities.FSIsolation]
    NONE: DriverCapabilities.FSIsolation
    CHROOT: DriverCapabilities.FSIsolation
    IMAGE: DriverCapabilities.FSIsolation
    class MountConfigs(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_MOUNTS: _ClassVar[DriverCapabilities.MountConfigs]
        ANY_MOUNTS: _ClassVar[DriverCapabilities.MountConfigs]
        NO_MOUNTS: _ClassVar[DriverCapabilities.MountConfigs]
    UNKNOWN_MOUNTS: DriverCapabilities.MountConfigs
    ANY_MOUNTS: DriverCapabilities.MountConfigs
    NO_MOUNTS: DriverCapabilities.MountConfigs
    SEND_SIGNALS_FIELD_NUMBER: _ClassVar[int]
    EXEC_FIELD_NUMBER: _ClassVar[int]
    FS_ISOLATION_FIELD_NUMBER: _ClassVar[int]
    NETWORK_ISOLATION_MODES_FIELD_NUMBER: _ClassVar[int]
    MUST_CREATE_NETWORK_FIELD_NUMBER: _ClassVar[int]
    MOUNT_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    REMOTE_TASKS_FIELD_NUMBER: _ClassVar[int]
    send_signals: bool
    exec: bool
    fs_isolation: DriverCapabilities.FSIsolation
    network_isolation_modes: _containers.RepeatedScalarFieldContainer[NetworkIsolationSpec.NetworkIsolationMode]
    must_create_network: bool
    mount_configs: DriverCapabilities.MountConfigs
    remote_tasks: bool
    def __init__(self, send_signals: _Optional[bool] = ..., exec: _Optional[bool] = ..., fs_isolation: _Optional[_Union[DriverCapabilities.FSIsolation, str]] = ..., network_isolation_modes: _Optional[_Iterable[_Union[NetworkIsolationSpec.NetworkIsolationMode, str]]] = ..., must_create_network: _Optional[bool] = ..., mount_configs: _Optional[_Union[DriverCapabilities.MountConfigs, str]] = ..., remote_tasks: _Optional[bool] = ...) -> None: ...

class NetworkIsolationSpec(_message.Message):
    __slots__ = ("mode", "path", "labels", "hostsConfig")
    class NetworkIsolationMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        HOST: _ClassVar[NetworkIsolationSpec.NetworkIsolationMode]
        GROUP: _ClassVar[NetworkIsolationSpec.NetworkIsolationMode]
        TASK: _ClassVar[NetworkIsolationSpec.NetworkIsolationMode]
        NONE: _ClassVar[NetworkIsolationSpec.NetworkIsolationMode]
    HOST: NetworkIsolationSpec.NetworkIsolationMode
    GROUP: NetworkIsolationSpec.NetworkIsolationMode
    TASK: NetworkIsolationSpec.NetworkIsolationMode
    NONE: NetworkIsolationSpec.NetworkIsolationMode
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MODE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    HOSTSCONFIG_FIELD_NUMBER: _ClassVar[int]
    mode: NetworkIsolationSpec.NetworkIsolationMode
    path: str
    labels: _containers.ScalarMap[str, str]
    hostsConfig: HostsConfig
    def __init__(self, mode: _Optional[_Union[NetworkIsolationSpec.NetworkIsolationMode, str]] = ..., path: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., hostsConfig: _Optional[_Union[HostsConfig, _Mapping]] = ...) -> None: ...

class HostsConfig(_message.Message):
    __slots__ = ("hostname", "address")
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    hostname: str
    address: str
    def __init__(self, hostname: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class DNSConfig(_message.Message):
    __slots__ = ("servers", "searches", "options")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    SEARCHES_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedScalarFieldContainer[str]
    searches: _containers.RepeatedScalarFieldContainer[str]
    options: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[str]] = ..., searches: _Optional[_Iterable[str]] = ..., options: _Optional[_Iterable[str]] = ...) -> None: ...

class TaskConfig(_message.Message):
    __slots__ = ("id", "name", "msgpack_driver_config", "env", "device_env", "resources", "mounts", "devices", "user", "alloc_dir", "stdout_path", "stderr_path", "task_group_name", "job_name", "alloc_id", "network_isolation_spec", "dns")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class DeviceEnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MSGPACK_DRIVER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ENV_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    MOUNTS_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    ALLOC_DIR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_PATH_FIELD_NUMBER: _ClassVar[int]
    STDERR_PATH_FIELD_NUMBER: _ClassVar[int]
    TASK_GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOC_ID_FIELD_NUMBER: _ClassVar[int]
    NETWORK_ISOLATION_SPEC_FIELD_NUMBER: _ClassVar[int]
    DNS_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    msgpack_driver_config: bytes
    env: _containers.ScalarMap[str, str]
    device_env: _containers.ScalarMap[str, str]
    resources: Resources
    mounts: _containers.RepeatedCompositeFieldContainer[Mount]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    user: str
    alloc_dir: str
    stdout_path: str
    stderr_path: str
    task_group_name: str
    job_name: str
    alloc_id: str
    network_isolation_spec: NetworkIsolationSpec
    dns: DNSConfig
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., msgpack_driver_config: _Optional[bytes] = ..., env: _Optional[_Mapping[str, str]] = ..., device_env: _Optional[_Mapping[str, str]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., mounts: _Optional[_Iterable[_Union[Mount, _Mapping]]] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., user: _Optional[str] = ..., alloc_dir: _Optional[str] = ..., stdout_path: _Optional[str] = ..., stderr_path: _Optional[str] = ..., task_group_name: _Optional[str] = ..., job_name: _Optional[str] = ..., alloc_id: _Optional[str] = ..., network_isolation_spec: _Optional[_Union[NetworkIsolationSpec, _Mapping]] = ..., dns: _Optional[_Union[DNSConfig, _Mapping]] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("allocated_resources", "linux_resources", "ports")
    ALLOCATED_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    LINUX_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    allocated_resources: AllocatedTaskResources
    linux_resources: LinuxResources
    ports: _containers.RepeatedCompositeFieldContainer[PortMapping]
    def __init__(self, allocated_resources: _Optional[_Union[AllocatedTaskResources, _Mapping]] = ..., linux_resources: _Optional[_Union[LinuxResources, _Mapping]] = ..., ports: _Optional[_Iterable[_Union[PortMapping, _Mapping]]] = ...) -> None: ...

class AllocatedTaskResources(_message.Message):
    __slots__ = ("cpu", "memory", "networks")
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    NETWORKS_FIELD_NUMBER: _ClassVar[int]
    cpu: AllocatedCpuResources
    memory: AllocatedMemoryResources
    networks: _containers.RepeatedCompositeFieldContainer[NetworkResource]
    def __init__(self, cpu: _Optional[_Union[AllocatedCpuResources, _Mapping]] = ..., memory: _Optional[_Union[AllocatedMemoryResources, _Mapping]] = ..., networks: _Optional[_Iterable[_Union[NetworkResource, _Mapping]]] = ...) -> None: ...

class AllocatedCpuResources(_message.Message):
    __slots__ = ("cpu_shares",)
    CPU_SHARES_FIELD_NUMBER: _ClassVar[int]
    cpu_shares: int
    def __init__(self, cpu_shares: _Optional[int] = ...) -> None: ...

class AllocatedMemoryResources(_message.Message):
    __slots__ = ("memory_mb", "memory_max_mb")
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MAX_MB_FIELD_NUMBER: _ClassVar[int]
    memory_mb: int
    memory_max_mb: int
    def __init__(self, memory_mb: _Optional[int] = ..., memory_max_mb: _Optional[int] = ...) -> None: ...

class NetworkResource(_message.Message):
    __slots__ = ("device", "cidr", "ip", "mbits", "reserved_ports", "dynamic_ports")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    CIDR_FIELD_NUMBER: _ClassVar[int]
    IP_FIELD_NUMBER: _ClassVar[int]
    MBITS_FIELD_NUMBER: _ClassVar[int]
    RESERVED_PORTS_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_PORTS_FIELD_NUMBER: _ClassVar[int]
    device: str
    cidr: str
    ip: str
    mbits: int
    reserved_ports: _containers.RepeatedCompositeFieldContainer[NetworkPort]
    dynamic_ports: _containers.RepeatedCompositeFieldContainer[NetworkPort]
    def __init__(self, device: _Optional[str] = ..., cidr: _Optional[str] = ..., ip: _Optional[str] = ..., mbits: _Optional[int] = ..., reserved_ports: _Optional[_Iterable[_Union[NetworkPort, _Mapping]]] = ..., dynamic_ports: _Optional[_Iterable[_Union[NetworkPort, _Mapping]]] = ...) -> None: ...

class NetworkPort(_message.Message):
    __slots__ = ("label", "value")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    label: str
    value: int
    def __init__(self, label: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...

class PortMapping(_message.Message):
    __slots__ = ("label", "value", "to", "host_ip")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    label: str
    value: int
    to: int
    host_ip: str
    def __init__(self, label: _Optional[str] = ..., value: _Optional[int] = ..., to: _Optional[int] = ..., host_ip: _Optional[str] = ...) -> None: ...

class LinuxResources(_message.Message):
    __slots__ = ("cpu_period", "cpu_quota", "cpu_shares", "memory_limit_bytes", "oom_score_adj", "cpuset_cpus", "cpuset_cgroup", "PercentTicks")
    CPU_PERIOD_FIELD_NUMBER: _ClassVar[int]
    CPU_QUOTA_FIELD_NUMBER: _ClassVar[int]
    CPU_SHARES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    OOM_SCORE_ADJ_FIELD_NUMBER: _ClassVar[int]
    CPUSET_CPUS_FIELD_NUMBER: _ClassVar[int]
    CPUSET_CGROUP_FIELD_NUMBER: _ClassVar[int]
    PERCENTTICKS_FIELD_NUMBER: _ClassVar[int]
    cpu_period: int
    cpu_quota: int
    cpu_shares: int
    memory_limit_bytes: int
    oom_score_adj: int
    cpuset_cpus: str
    cpuset_cgroup: str
    PercentTicks: float
    def __init__(self, cpu_period: _Optional[int] = ..., cpu_quota: _Optional[int] = ..., cpu_shares: _Optional[int] = ..., memory_limit_bytes: _Optional[int] = ..., oom_score_adj: _Optional[int] = ..., cpuset_cpus: _Optional[str] = ..., cpuset_cgroup: _Optional[str] = ..., PercentTicks: _Optional[float] = ...) -> None: ...

class Mount(_message.Message):
    __slots__ = ("task_path", "host_path", "readonly")
    TASK_PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    READONLY_FIELD_NUMBER: _ClassVar[int]
    task_path: str
    host_path: str
    readonly: bool
    def __init__(self, task_path: _Optional[str] = ..., host_path: _Optional[str] = ..., readonly: _Optional[bool] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("task_path", "host_path", "cgroup_permissions")
    TASK_PATH_FIELD_NUMBER: _ClassVar[int]
    HOST_PATH_FIELD_NUMBER: _ClassVar[int]
    CGROUP_PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    task_path: str
    host_path: str
    cgroup_permissions: str
    def __init__(self, task_path: _Optional[str] = ..., host_path: _Optional[str] = ..., cgroup_permissions: _Optional[str] = ...) -> None: ...

class TaskHandle(_message.Message):
    __slots__ = ("version", "config", "state", "driver_state")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DRIVER_STATE_FIELD_NUMBER: _ClassVar[int]
    version: int
    config: TaskConfig
    state: TaskState
    driver_state: bytes
    def __init__(self, version: _Optional[int] = ..., config: _Optional[_Union[TaskConfig, _Mapping]] = ..., state: _Optional[_Union[TaskState, str]] = ..., driver_state: _Optional[bytes] = ...) -> None: ...

class NetworkOverride(_message.Message):
    __slots__ = ("port_map", "addr", "auto_advertise")
    class PortMapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    PORT_MAP_FIELD_NUMBER: _ClassVar[int]
    ADDR_FIELD_NUMBER: _ClassVar[int]
    AUTO_ADVERTISE_FIELD_NUMBER: _ClassVar[int]
    port_map: _containers.ScalarMap[str, int]
    addr: str
    auto_advertise: bool
    def __init__(self, port_map: _Optional[_Mapping[str, int]] = ..., addr: _Optional[str] = ..., auto_advertise: _Optional[bool] = ...) -> None: ...

class ExitResult(_message.Message):
    __slots__ = ("exit_code", "signal", "oom_killed")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    signal: int
    oom_killed: bool
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., oom_killed: _Optional[bool] = ...) -> None: ...

class TaskStatus(_message.Message):
    __slots__ = ("id", "name", "state", "started_at", "completed_at", "result")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    state: TaskState
    started_at: _timestamp_pb2.Timestamp
    completed_at: _timestamp_pb2.Timestamp
    result: ExitResult
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., result: _Optional[_Union[ExitResult, _Mapping]] = ...) -> None: ...

class TaskDriverStatus(_message.Message):
    __slots__ = ("attributes",)
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.ScalarMap[str, str]
    def __init__(self, attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class TaskStats(_message.Message):
    __slots__ = ("id", "timestamp", "agg_resource_usage", "resource_usage_by_pid")
    class ResourceUsageByPidEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TaskResourceUsage
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TaskResourceUsage, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    AGG_RESOURCE_USAGE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_USAGE_BY_PID_FIELD_NUMBER: _ClassVar[int]
    id: str
    timestamp: _timestamp_pb2.Timestamp
    agg_resource_usage: TaskResourceUsage
    resource_usage_by_pid: _containers.MessageMap[str, TaskResourceUsage]
    def __init__(self, id: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agg_resource_usage: _Optional[_Union[TaskResourceUsage, _Mapping]] = ..., resource_usage_by_pid: _Optional[_Mapping[str, TaskResourceUsage]] = ...) -> None: ...

class TaskResourceUsage(_message.Message):
    __slots__ = ("cpu", "memory")
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    cpu: CPUUsage
    memory: MemoryUsage
    def __init__(self, cpu: _Optional[_Union[CPUUsage, _Mapping]] = ..., memory: _Optional[_Union[MemoryUsage, _Mapping]] = ...) -> None: ...

class CPUUsage(_message.Message):
    __slots__ = ("system_mode", "user_mode", "total_ticks", "throttled_periods", "throttled_time", "percent", "measured_fields")
    class Fields(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SYSTEM_MODE: _ClassVar[CPUUsage.Fields]
        USER_MODE: _ClassVar[CPUUsage.Fields]
        TOTAL_TICKS: _ClassVar[CPUUsage.Fields]
        THROTTLED_PERIODS: _ClassVar[CPUUsage.Fields]
        THROTTLED_TIME: _ClassVar[CPUUsage.Fields]
        PERCENT: _ClassVar[CPUUsage.Fields]
    SYSTEM_MODE: CPUUsage.Fields
    USER_MODE: CPUUsage.Fields
    TOTAL_TICKS: CPUUsage.Fields
    THROTTLED_PERIODS: CPUUsage.Fields
    THROTTLED_TIME: CPUUsage.Fields
    PERCENT: CPUUsage.Fields
    SYSTEM_MODE_FIELD_NUMBER: _ClassVar[int]
    USER_MODE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TICKS_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_PERIODS_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_TIME_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    MEASURED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    system_mode: float
    user_mode: float
    total_ticks: float
    throttled_periods: int
    throttled_time: int
    percent: float
    measured_fields: _containers.RepeatedScalarFieldContainer[CPUUsage.Fields]
    def __init__(self, system_mode: _Optional[float] = ..., user_mode: _Optional[float] = ..., total_ticks: _Optional[float] = ..., throttled_periods: _Optional[int] = ..., throttled_time: _Optional[int] = ..., percent: _Optional[float] = ..., measured_fields: _Optional[_Iterable[_Union[CPUUsage.Fields, str]]] = ...) -> None: ...

class MemoryUsage(_message.Message):
    __slots__ = ("rss", "cache", "max_usage", "kernel_usage", "kernel_max_usage", "usage", "swap", "measured_fields")
    class Fields(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RSS: _ClassVar[MemoryUsage.Fields]
        CACHE: _ClassVar[MemoryUsage.Fields]
        MAX_USAGE: _ClassVar[MemoryUsage.Fields]
        KERNEL_USAGE: _ClassVar[MemoryUsage.Fields]
        KERNEL_MAX_USAGE: _ClassVar[MemoryUsage.Fields]
        USAGE: _ClassVar[MemoryUsage.Fields]
        SWAP: _ClassVar[MemoryUsage.Fields]
    RSS: MemoryUsage.Fields
    CACHE: MemoryUsage.Fields
    MAX_USAGE: MemoryUsage.Fields
    KERNEL_USAGE: MemoryUsage.Fields
    KERNEL_MAX_USAGE: MemoryUsage.Fields
    USAGE: MemoryUsage.Fields
    SWAP: MemoryUsage.Fields
    RSS_FIELD_NUMBER: _ClassVar[int]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    MAX_USAGE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_USAGE_FIELD_NUMBER: _ClassVar[int]
    KERNEL_MAX_USAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    SWAP_FIELD_NUMBER: _ClassVar[int]
    MEASURED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    rss: int
    cache: int
    max_usage: int
    kernel_usage: int
    kernel_max_usage: int
    usage: int
    swap: int
    measured_fields: _containers.RepeatedScalarFieldContainer[MemoryUsage.Fields]
    def __init__(self, rss: _Optional[int] = ..., cache: _Optional[int] = ..., max_usage: _Optional[int] = ..., kernel_usage: _Optional[int] = ..., kernel_max_usage: _Optional[int] = ..., usage: _Optional[int] = ..., swap: _Optional[int] = ..., measured_fields: _Optional[_Iterable[_Union[MemoryUsage.Fields, str]]] = ...) -> None: ...

class DriverTaskEvent(_message.Message):
    __slots__ = ("task_id", "alloc_id", "task_name", "timestamp", "message", "annotations")
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ALLOC_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    alloc_id: str
    task_name: str
    timestamp: _timestamp_pb2.Timestamp
    message: str
    annotations: _containers.ScalarMap[str, str]
    def __init__(self, task_id: _Optional[str] = ..., alloc_id: _Optional[str] = ..., task_name: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., message: _Optional[str] = ..., annotations: _Optional[_Mapping[str, str]] = ...) -> None: ...
