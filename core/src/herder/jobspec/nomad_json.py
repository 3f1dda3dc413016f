"""Nomad's JSON job format, the one its HTTP API takes and ``nomad job run -output`` prints.

``{"Job": {"ID": ..., "TaskGroups": [{"Tasks": [...]}]}}``: capitalised keys,
null (or the zero value of a field Go cannot tell from unset, :mod:`.nomad_structs`)
for "the default", durations in nanoseconds, ports split into
``ReservedPorts`` and ``DynamicPorts`` of a list of ``Networks``. A ``.json``
file in this shape is told apart from the canonical form by its content (a
top-level ``Job`` map) and converted to the canonical document here, key by
key; what Nomad knows and herder does not implement takes its HCL name, so
that it is dropped with the usual warning.

:func:`to_nomad` writes the canonical document in Nomad's shape again.
"""

from __future__ import annotations

import re
from typing import Any

from herder.jobspec.nomad_structs import (
    IDENTITY,
    JOB,
    NETWORK,
    PORT,
    Struct,
    canonical_name,
    field_struct,
    normalized,
)
from herder.sdk.durations import parse_duration

_NANOSECONDS = 1e9

# Keys whose HCL name is not the snake case of the JSON one.
_RENAMED = {
    "TaskGroups": "groups", "Tasks": "tasks", "Services": "services", "Checks": "checks",
    "Artifacts": "artifacts", "Templates": "templates", "RestartPolicy": "restart", "LogConfig": "logs",
    "Constraints": "constraints", "Affinities": "affinity", "Spreads": "spread", "Volumes": "volumes",
    "VolumeMounts": "volume_mounts", "Identities": "identity", "Actions": "action", "Secrets": "secret",
    "CSIPluginConfig": "csi_plugin", "ParameterizedJob": "parameterized", "ReschedulePolicy": "reschedule",
    "UI": "ui", "CPU": "cpu", "MemoryMB": "memory", "MemoryMaxMB": "memory_max", "DiskMB": "disk",
    "Devices": "device", "NUMA": "numa", "IOPS": "iops", "MBits": "mbits", "DNS": "dns", "CIDR": "cidr",
    "IP": "ip", "PortLabel": "port", "TLSSkipVerify": "tls_skip_verify", "TLSServerName": "tls_server_name",
    "GRPCService": "grpc_service", "GRPCUseTLS": "grpc_use_tls", "MaxFileSizeMB": "max_file_size",
    "GetterSource": "source", "RelativeDest": "destination", "GetterMode": "mode", "GetterOptions": "options",
    "GetterHeaders": "headers", "GetterInsecure": "insecure", "SourcePath": "source", "DestPath": "destination",
    "EmbeddedTmpl": "data", "LeftDelim": "left_delimiter", "RightDelim": "right_delimiter",
    "VaultGrace": "vault_grace", "Wait": "wait", "ErrMissingKey": "error_on_missing_key",
    "EphemeralDisk": "ephemeral_disk", "Envvars": "env", "SizeMB": "size", "Spec": "cron", "Specs": "crons",
    "DisableDefaultTCPCheck": "disable_default_tcp_check",
}
# Maps whose keys are the user's own (driver config, env, meta, ...): copied as they are.
_VERBATIM = {"Config", "Env", "Meta", "Header", "GetterOptions", "GetterHeaders", "CanaryMeta", "TaggedAddresses",
             "Policy"}
# Fields Nomad gives in nanoseconds that are durations in herder's document.
_DURATIONS = {
    "KillTimeout", "ShutdownDelay", "Interval", "Delay", "MaxDelay", "Timeout", "Grace", "Splay", "Stagger",
    "MinHealthyTime", "HealthyDeadline", "ProgressDeadline", "MaxRunDuration", "TTL",
}


def is_nomad_json(document: Any) -> bool:
    """A parsed JSON document in Nomad's API shape: a top-level ``Job`` map."""
    return isinstance(document, dict) and isinstance(document.get("Job"), dict) and "job" not in document


def from_nomad(document: dict[str, Any]) -> dict[str, Any]:
    """The canonical document of a job in Nomad's JSON shape; a field at its unset value
    (:mod:`herder.jobspec.nomad_structs`) is left out, as Nomad's decoder leaves it."""
    spec = normalized(document["Job"])
    job = _convert({k: v for k, v in spec.items() if k not in ("ID", "Name")}, JOB)
    name = spec.get("Name") or spec.get("ID")
    if name is not None:
        job = {"name": name, **job}
    return {"job": job}


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key).lower()


def _convert(spec: dict[str, Any], struct: Struct | None) -> dict[str, Any]:
    """Convert one map of Nomad's ``struct`` (None: one the table does not describe), its unset fields out."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "Networks":
            if value:
                out["network"] = _network(value[0])
            continue
        if key in ("Identity", "Identities"):  # the default identity first, then the others: one list
            given = [value] if key == "Identity" else value
            if isinstance(given, list):
                out["identity"] = [*out.get("identity", []),
                                   *(_convert(item, IDENTITY) if isinstance(item, dict) else item for item in given)]
                continue
        name = canonical_name(struct, key) or _RENAMED.get(key) or _snake(key)
        inner = field_struct(struct, key)
        if key == "Volumes" and isinstance(value, dict):  # by name in Nomad, a list of named blocks in herder's
            out[name] = [{"name": label, **(_convert(item, inner) if isinstance(item, dict) else {})}
                         for label, item in value.items()]
        elif key in _VERBATIM:
            out[name] = value
        elif key in _DURATIONS and isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = value / _NANOSECONDS
        elif isinstance(value, dict):
            out[name] = _convert(value, inner)
        elif isinstance(value, list):
            out[name] = [_convert(item, inner) if isinstance(item, dict) else item for item in value]
        else:
            out[name] = value
    return out


def _network(spec: dict[str, Any]) -> dict[str, Any]:
    """A Nomad network: ``ReservedPorts`` (static) and ``DynamicPorts`` become ``ports``."""
    out = _convert({key: value for key, value in spec.items() if key not in ("ReservedPorts", "DynamicPorts")},
                   NETWORK)
    ports: list[dict[str, Any]] = []
    for reserved, key in ((True, "ReservedPorts"), (False, "DynamicPorts")):
        for port in spec.get(key) or []:
            converted = _convert({k: v for k, v in port.items() if k not in ("Value", "To")}, PORT)
            if reserved and port.get("Value"):
                converted["static"] = port["Value"]
            if port.get("To", 0) > 0:  # 0: none, -1: the host port, as herder does without ``to``
                converted["to"] = port["To"]
            ports.append(converted)
    if ports:
        out["ports"] = ports
    return out


_BACK = {value: key for key, value in _RENAMED.items()}
_CONSTRAINT_BACK = {"attribute": "LTarget", "value": "RTarget", "operator": "Operand"}
_BACK |= {"name": "Name", "static": "Value", "to": "To", "label": "Label", "port": "PortLabel", "env": "Env",
          "destination": "DestPath", "source": "SourcePath", "options": "GetterOptions", "mode": "GetterMode"}


def to_nomad(document: dict[str, Any]) -> dict[str, Any]:
    """The canonical document in Nomad's JSON shape (for tests and ``-output``-like uses)."""
    job = document["job"]
    out = _back(job, "job")
    out["ID"] = job["name"]
    return {"Job": out}


def _camel(key: str) -> str:
    return "".join(part.capitalize() for part in key.split("_"))


def _back(spec: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key == "network":
            out["Networks"] = [_network_back(value)]
            continue
        if key == "volumes":
            out["Volumes"] = {volume["name"]: _back(volume, key) for volume in value}
            continue
        name = _back_name(key, where)
        if name in _VERBATIM:
            out[name] = value
        elif name in _DURATIONS:
            out[name] = round(parse_duration(value) * _NANOSECONDS)
        elif isinstance(value, dict):
            out[name] = _back(value, key)
        elif isinstance(value, list):
            out[name] = [_back(item, key) if isinstance(item, dict) else item for item in value]
        else:
            out[name] = value
    return out


def _back_name(key: str, where: str) -> str:
    if where == "constraints" and key in _CONSTRAINT_BACK:
        return _CONSTRAINT_BACK[key]
    if where in ("services", "checks") and key == "task":
        return "TaskName"
    if where == "artifacts" and key in ("source", "destination"):
        return {"source": "GetterSource", "destination": "RelativeDest"}[key]
    if where in ("volumes", "volume_mounts") and key in ("source", "destination"):
        return _camel(key)
    if where == "templates" and key == "env":
        return "Envvars"
    if where == "identity" and key in ("aud", "ttl"):
        return {"aud": "Audience", "ttl": "TTL"}[key]
    if where != "artifacts" and key in ("options", "mode"):
        return _camel(key)
    return _BACK.get(key) or _camel(key)


def _network_back(spec: dict[str, Any]) -> dict[str, Any]:
    out = _back({key: value for key, value in spec.items() if key != "ports"}, "network")
    for port in spec.get("ports", []):
        converted = _back(port, "port")
        out.setdefault("ReservedPorts" if "static" in port else "DynamicPorts", []).append(converted)
    return out
