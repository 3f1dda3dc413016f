"""Nomad 1.1's API structs (``api/`` of hashicorp/nomad) field by field: which value of each means "unset".

Nomad's command line sends a job as these structs with every field filled,
zero values included (``"AddressMode": ""``, ``"Leader": false``,
``"Checks": null``), and Nomad's decoder reads them so: null is "unset", and
so is the zero value of a field Go cannot tell from unset (a ``string``, a
``bool``, an ``int`` that is not a pointer; an empty list or map). A pointer
field (``Count *int``) is set by its zero (``"Count": 0`` is no instance),
unless the zero is what Nomad gives it when unset (``"AllAtOnce": false``,
``"Cores": 0``): a Nomad server writes those in the job it shows.
:func:`normalized` takes every unset field out, so that a job means the same
thing whichever client wrote it, and reads as one text whoever sent it.

Each struct is a table, field to what it holds: a value (the zero that means
unset), :data:`VALUE` (only null is unset: the zero is a value),
:data:`SERVER` (set by Nomad's servers, not by the job's author: always taken
out), or a struct (a map), :class:`ListOf` them or :class:`MapOf` names to
them. A field a table does not name (one of a later Nomad, or a
mistake) is left as it is, for the conversion to warn about or refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

VALUE = object()
"""A field whose zero is a value (a pointer field herder reads): only null is unset."""
SERVER = object()
"""A field set by Nomad's servers (``Status``, ``Version``, ...): never the job's author's."""


@dataclass(frozen=True)
class Struct:
    """One of Nomad's API structs: its fields (see the module), the canonical names of those
    whose name is not the usual one (``names``), and when the struct itself is unset:
    when nothing is set in it, unless ``keep_empty`` (``parameterized {}`` makes a job
    parameterized), or when its ``needs`` field is unset (a lifecycle without a hook)."""

    fields: Mapping[str, Any]
    names: Mapping[str, str] = field(default_factory=dict)
    keep_empty: bool = False
    needs: str | None = None


@dataclass(frozen=True)
class ListOf:
    """A list of structs (a group's ``Tasks``)."""

    struct: Struct


@dataclass(frozen=True)
class MapOf:
    """A map of names to structs (a group's ``Volumes``)."""

    struct: Struct


CONSTRAINT = Struct({"LTarget": "", "RTarget": "", "Operand": ""},
                    names={"LTarget": "attribute", "RTarget": "value", "Operand": "operator"})
AFFINITY = Struct({"LTarget": "", "RTarget": "", "Operand": "", "Weight": VALUE})
SPREAD = Struct({"Attribute": "", "Weight": VALUE, "SpreadTarget": ListOf(Struct({"Value": "", "Percent": 0}))})
# No health check and no healthy deadline are no valid strategy: Nomad's command line sends them as unset.
UPDATE = Struct({**dict.fromkeys(("Stagger", "MaxParallel", "MinHealthyTime", "ProgressDeadline"), VALUE),
                 "HealthCheck": "", "HealthyDeadline": 0, "Canary": 0, "AutoRevert": False, "AutoPromote": False})
MIGRATE = Struct(dict.fromkeys(("MaxParallel", "HealthCheck", "MinHealthyTime", "HealthyDeadline"), VALUE))
RESCHEDULE = Struct(dict.fromkeys(("Attempts", "Interval", "Delay", "DelayFunction", "MaxDelay", "Unlimited"), VALUE))
RESTART = Struct(dict.fromkeys(("Interval", "Attempts", "Delay", "Mode"), VALUE))
EPHEMERAL_DISK = Struct({"Sticky": False, "Migrate": False, "SizeMB": VALUE})
LOG_CONFIG = Struct(dict.fromkeys(("MaxFiles", "MaxFileSizeMB"), VALUE))
TEMPLATE = Struct({
    **dict.fromkeys(("SourcePath", "DestPath", "EmbeddedTmpl", "ChangeMode", "ChangeSignal", "Splay", "Perms",
                     "LeftDelim", "RightDelim"), VALUE), "Envvars": False, "VaultGrace": 0,
})
ARTIFACT = Struct({"GetterSource": VALUE, "GetterOptions": {}, "GetterHeaders": {}, "GetterMode": VALUE,
                   "RelativeDest": VALUE})
VAULT = Struct({"Policies": [], "Namespace": VALUE, "Env": VALUE, "ChangeMode": VALUE, "ChangeSignal": VALUE})
VOLUME_REQUEST = Struct({"Name": "", "Type": "", "Source": "", "ReadOnly": False, "AccessMode": "",
                         "AttachmentMode": "", "MountOptions": Struct({"FSType": "", "MountFlags": []}),
                         "PerAlloc": False, "Sticky": False})
VOLUME_MOUNT = Struct({"Volume": VALUE, "Destination": VALUE, "ReadOnly": False, "PropagationMode": VALUE,
                       "SELinuxLabel": ""})
LIFECYCLE = Struct({"Hook": "", "Sidecar": False}, needs="Hook")
DISPATCH_PAYLOAD = Struct({"File": ""})
PERIODIC = Struct({"Enabled": VALUE, "Spec": VALUE, "SpecType": "cron", "ProhibitOverlap": False,
                   "TimeZone": ""}, keep_empty=True)
"""``SpecType`` ``cron`` is the only one Nomad has; a ``TimeZone`` of ``""`` is UTC, as unset."""
PARAMETERIZED = Struct({"Payload": "", "MetaRequired": [], "MetaOptional": []}, keep_empty=True)
MULTIREGION = Struct({"Strategy": Struct({"MaxParallel": VALUE, "OnFailure": VALUE}),
                      "Regions": ListOf(Struct({"Name": "", "Count": VALUE, "Datacenters": [], "Meta": {}}))})
SCALING_POLICY = Struct({"Min": VALUE, "Max": VALUE, "Policy": {}, "Enabled": VALUE, "Type": "", "ID": "",
                         "Namespace": "", "Target": {}, "CreateIndex": 0, "ModifyIndex": 0})
CONSUL = Struct({"Namespace": ""})
CSI_PLUGIN = Struct({"ID": "", "Type": "", "MountDir": ""})
IDENTITY = Struct({"Name": "", "Audience": [], "ChangeMode": "", "ChangeSignal": "", "Env": False, "File": False,
                   "Filepath": "", "ServiceName": "", "TTL": 0, "ExtraClaims": []}, names={"Audience": "aud"})
"""A workload identity (Nomad 1.7): a task's default one is its ``Identity``, the others its ``Identities``."""
DEVICE = Struct({"Name": "", "Count": VALUE, "Constraints": ListOf(CONSTRAINT), "Affinities": ListOf(AFFINITY)})

PORT = Struct({"Label": "", "Value": 0, "To": 0, "HostNetwork": ""})
NETWORK = Struct({"Mode": "", "Device": "", "CIDR": "", "IP": "",
                  "DNS": Struct({"Servers": [], "Searches": [], "Options": []}),
                  "ReservedPorts": ListOf(PORT), "DynamicPorts": ListOf(PORT), "MBits": 0})
RESOURCES = Struct({"CPU": VALUE, "Cores": 0, "MemoryMB": VALUE, "MemoryMaxMB": 0, "DiskMB": 0,
                    "Networks": ListOf(NETWORK), "Devices": ListOf(DEVICE), "IOPS": 0})
"""``MemoryMaxMB`` of 0 is no oversubscription, ``Cores``, ``DiskMB``, ``IOPS`` of 0 no request: unset."""

CHECK_RESTART = Struct({"Limit": 0, "Grace": VALUE, "IgnoreWarnings": False})
"""A ``Limit`` of 0 restarts nothing: with nothing else set, no check_restart at all."""
UPSTREAM = Struct({
    "DestinationName": "", "DestinationNamespace": "", "DestinationPeer": "", "DestinationPartition": "",
    "DestinationType": "", "LocalBindPort": 0, "Datacenter": "", "LocalBindAddress": "", "LocalBindSocketPath": "",
    "LocalBindSocketMode": "", "MeshGateway": Struct({"Mode": ""}), "Config": {},
})
EXPOSE_PATH = Struct({"Path": "", "Protocol": "", "LocalPathPort": 0, "ListenerPort": ""})
EXPOSE = Struct({"Paths": ListOf(EXPOSE_PATH), "Path": ListOf(EXPOSE_PATH)}, names={"Path": "paths"})
"""Nomad 1.1 writes ``Path``, later versions ``Paths``: either is the list of paths."""
CONSUL_PROXY = Struct({
    "LocalServiceAddress": "", "LocalServicePort": 0, "Expose": EXPOSE, "ExposeConfig": EXPOSE,
    "Upstreams": ListOf(UPSTREAM), "TransparentProxy": VALUE, "Config": {},
}, names={"ExposeConfig": "expose"})
SIDECAR_SERVICE = Struct({"Tags": [], "Port": "", "Proxy": CONSUL_PROXY, "DisableDefaultTCPCheck": False,
                          "Meta": {}}, keep_empty=True)
"""``sidecar_service {}`` asks for a sidecar, with nothing set in it."""
SIDECAR_TASK = Struct({
    "Name": "", "Driver": "", "User": "", "Config": {}, "Env": {}, "Resources": RESOURCES, "Meta": {},
    "KillTimeout": VALUE, "LogConfig": LOG_CONFIG, "ShutdownDelay": VALUE, "KillSignal": "",
    "VolumeMounts": ListOf(VOLUME_MOUNT),
})
CONSUL_CONNECT = Struct({"Native": False, "Gateway": VALUE, "SidecarService": SIDECAR_SERVICE,
                         "SidecarTask": SIDECAR_TASK})
SERVICE_CHECK = Struct({
    "Id": "", "Name": "", "Type": "", "Command": "", "Args": [], "Path": "", "Protocol": "", "PortLabel": "",
    "Expose": False, "AddressMode": "", "Interval": 0, "Timeout": 0, "InitialStatus": "", "TLSSkipVerify": False,
    "Header": {}, "Method": "", "CheckRestart": CHECK_RESTART, "GRPCService": "", "GRPCUseTLS": False,
    "TaskName": "", "SuccessBeforePassing": 0, "FailuresBeforeCritical": 0, "Body": "", "OnUpdate": "",
}, names={"TaskName": "task"})
SERVICE = Struct({
    "Id": "", "Name": "", "Tags": [], "CanaryTags": [], "EnableTagOverride": False, "PortLabel": "",
    "AddressMode": "", "Checks": ListOf(SERVICE_CHECK), "CheckRestart": CHECK_RESTART, "Connect": CONSUL_CONNECT,
    "Meta": {}, "CanaryMeta": {}, "TaskName": "", "OnUpdate": "", "Provider": "consul",
}, names={"TaskName": "task"})
"""``Provider``: Nomad 1.3's clients send ``consul`` for a service that names none (``api.Service.Canonicalize``),
so only ``nomad`` is told apart; an unset provider is the agent's ``services.backend``."""

TASK = Struct({
    "Name": "", "Driver": "", "User": "", "Lifecycle": LIFECYCLE, "Config": {}, "Constraints": ListOf(CONSTRAINT),
    "Affinities": ListOf(AFFINITY), "Env": {}, "Services": ListOf(SERVICE), "Resources": RESOURCES,
    "RestartPolicy": RESTART, "Meta": {}, "KillTimeout": VALUE, "LogConfig": LOG_CONFIG,
    "Artifacts": ListOf(ARTIFACT), "Vault": VAULT, "Templates": ListOf(TEMPLATE), "DispatchPayload": DISPATCH_PAYLOAD,
    "VolumeMounts": ListOf(VOLUME_MOUNT), "CSIPluginConfig": CSI_PLUGIN, "Leader": False, "ShutdownDelay": 0,
    "KillSignal": "", "Kind": "", "ScalingPolicies": ListOf(SCALING_POLICY), "Identity": IDENTITY,
    "Identities": ListOf(IDENTITY),
}, names={"ScalingPolicies": "scaling"})
TASK_GROUP = Struct({
    "Name": "", "Count": VALUE, "Constraints": ListOf(CONSTRAINT), "Affinities": ListOf(AFFINITY),
    "Tasks": ListOf(TASK), "Spreads": ListOf(SPREAD), "Volumes": MapOf(VOLUME_REQUEST), "RestartPolicy": RESTART,
    "ReschedulePolicy": RESCHEDULE, "EphemeralDisk": EPHEMERAL_DISK, "Update": UPDATE, "Migrate": MIGRATE,
    "Networks": ListOf(NETWORK), "Meta": {}, "Services": ListOf(SERVICE), "ShutdownDelay": 0,
    "StopAfterClientDisconnect": 0, "Scaling": SCALING_POLICY, "Consul": CONSUL, "MaxRunDuration": VALUE,
})
JOB = Struct({
    "Region": "", "Namespace": "", "ID": VALUE, "Name": VALUE, "Type": "", "Priority": VALUE, "AllAtOnce": False,
    "Datacenters": VALUE, "Constraints": ListOf(CONSTRAINT), "Affinities": ListOf(AFFINITY),
    "TaskGroups": ListOf(TASK_GROUP),
    "Update": UPDATE, "Multiregion": MULTIREGION, "Spreads": ListOf(SPREAD), "Periodic": PERIODIC,
    "ParameterizedJob": PARAMETERIZED, "Reschedule": RESCHEDULE, "Migrate": MIGRATE, "Meta": {},
    "ConsulToken": "", "VaultToken": "",
    **dict.fromkeys(("Stop", "ParentID", "Dispatched", "Payload", "ConsulNamespace", "VaultNamespace",
                     "NomadTokenID", "Status", "StatusDescription", "Stable", "Version", "SubmitTime",
                     "CreateIndex", "ModifyIndex", "JobModifyIndex"), SERVER),
})
"""``Datacenters`` stays when empty, so that an empty list is refused as Nomad refuses it."""


def normalized(value: Mapping[str, Any], struct: Struct = JOB) -> dict[str, Any]:
    """``value``, one of Nomad's ``struct`` (by default a job, the map under ``Job``), with every unset
    field taken out, at every depth, and the fields of each struct in the order Nomad writes them."""
    return _struct(value, struct) or {}


def _struct(value: Mapping[str, Any], struct: Struct) -> dict[str, Any] | None:
    """``value`` without its unset fields, in the order of Nomad's struct; None when the struct itself is unset."""
    out: dict[str, Any] = {}
    for key in [*(key for key in struct.fields if key in value), *(key for key in value if key not in struct.fields)]:
        kept = _field(value[key], struct.fields.get(key, VALUE))
        if kept is not None:
            out[key] = kept
    if struct.needs is not None and struct.needs not in out:
        return None
    return out if out or struct.keep_empty else None


def _field(value: Any, kind: Any) -> Any:
    """``value`` of a field of ``kind`` (see the module) as it is kept; None when unset."""
    if value is None or kind is SERVER:
        return None
    if kind is VALUE:
        return value
    if isinstance(kind, Struct):
        return _struct(value, kind) if isinstance(value, Mapping) else value
    if isinstance(kind, MapOf) and isinstance(value, Mapping):
        return {name: _item(item, kind.struct) for name, item in value.items()}
    if isinstance(kind, ListOf) and isinstance(value, list):
        return [_item(item, kind.struct) for item in value]
    if isinstance(kind, (MapOf, ListOf)):
        return value  # not what Nomad has there: for the schema to refuse
    return None if _same(value, kind) else value


def _item(value: Any, struct: Struct) -> Any:
    """An item of a list or map of structs: kept, even with nothing set in it."""
    return _struct(value, struct) or {} if isinstance(value, Mapping) else value


def _same(value: Any, zero: Any) -> bool:
    """``value`` is ``zero`` (of the same type: ``false`` is not the number 0)."""
    return type(value) is type(zero) and value == zero


def canonical_name(struct: Struct | None, key: str) -> str | None:
    """The canonical name of ``key`` in ``struct`` where it is not the usual one."""
    return struct.names.get(key) if struct is not None else None


def field_struct(struct: Struct | None, key: str) -> Struct | None:
    """The struct that field ``key`` of ``struct`` holds (alone, in a list or by name), if any."""
    kind = struct.fields.get(key) if struct is not None else None
    if isinstance(kind, (ListOf, MapOf)):
        kind = kind.struct
    return kind if isinstance(kind, Struct) else None
