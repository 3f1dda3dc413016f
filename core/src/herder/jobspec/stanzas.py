"""The keys of Nomad 1.x jobs that herder accepts but does not implement.

Every key Nomad's jobspec knows (its ``api`` structs' ``hcl`` tags) is either
implemented, in the job schema, or listed here: listed keys are dropped where
Nomad allows them and named in one warning. The same names anywhere else are
unknown keys like any other. Keys that only mean something among several
nodes, or between a client and its servers, are dropped without a warning
(``_ONE_NODE``): ``affinity`` and ``spread`` choose among nodes, and herder's
is the only one; ``migrate`` paces moving allocations off a draining node to
others; ``disconnect``, ``max_client_disconnect``,
``stop_after_client_disconnect`` and ``prevent_reschedule_on_lost`` say what
happens while a client has lost its servers, and herder's client is its own
server; ``all_at_once`` asks the scheduler to place all or nothing, which
herder always does; ``priority`` orders evaluations and preemption between
jobs competing for nodes, and herder evaluates each job as it comes and
preempts nothing.

Values herder reads differently from Nomad are warned about here too: a
task-level ``network.mode`` other than ``host`` (Nomad's legacy task network,
which Nomad itself runs on the host's) runs as host networking; a group's
network mode is implemented (``bridge``, ``none``, ``cni/NAME``); a Connect
gateway group (no task, a ``service`` with ``connect { gateway { ... } }``:
Nomad runs Envoy there) is left out, since herder runs Connect's sidecars but
not its gateways.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from herder.jobspec.hcl import DynamicBlock

HOST_MODE = "host"


@dataclass(frozen=True)
class _Block:
    """One kind of map in the canonical document: the keys to drop from it, and
    the maps (``blocks``) and lists of maps (``lists``) below it to visit.

    ``name`` prefixes the names of dropped keys in the warning (``network.dns``);
    None names them by their key alone, or by ``shown`` where a key alone would
    mislead.
    """

    drop: frozenset[str] = frozenset()
    name: str | None = None
    shown: dict[str, str] = field(default_factory=dict)
    blocks: dict[str, _Block] = field(default_factory=dict)
    lists: dict[str, _Block] = field(default_factory=dict)
    silent: frozenset[str] = frozenset()
    """Keys dropped without a warning: they mean nothing on one node (``affinity``, ``spread``)."""


_ONE_NODE = frozenset({"affinity", "spread"})
"""Keys without effect on one node, dropped without a warning (see above), at every level; the
group's and job's own below."""
_GROUP_ONE_NODE = _ONE_NODE | {"migrate", "disconnect", "max_client_disconnect", "stop_after_client_disconnect",
                               "prevent_reschedule_on_lost"}
_JOB_ONE_NODE = _ONE_NODE | {"migrate", "all_at_once", "priority"}
"""Preferences among nodes: with one node there is nothing to prefer."""
_PORT = _Block(frozenset({"host_network", "ignore_collision"}), "port")
_NETWORK = _Block(
    frozenset({"mbits", "device", "cidr", "ip", "dns", "reserved_ports", "hostname", "cni"}),
    "network",
    lists={"ports": _PORT},
)
_GROUP_NETWORK = _Block(
    frozenset({"mbits", "device", "cidr", "ip", "reserved_ports", "cni"}),
    "network",
    lists={"ports": _PORT},
)
_CHECK = _Block(
    frozenset({
        "id", "advertise", "notes", "tls_server_name", "success_before_passing",
        "failures_before_critical", "failures_before_warning", "body", "on_update",
    }),
    "check",
)
_UPSTREAM = _Block(
    frozenset({
        "destination_namespace", "destination_peer", "destination_partition", "destination_type",
        "local_bind_socket_path", "local_bind_socket_mode", "mesh_gateway", "config",
    }),
    "upstreams",
)
_CONNECT = _Block(
    frozenset({"gateway"}), "connect",
    blocks={
        "sidecar_service": _Block(
            frozenset({"meta"}), "sidecar_service",
            blocks={"proxy": _Block(frozenset({"transparent_proxy"}), "proxy", lists={"upstreams": _UPSTREAM})},
        ),
        "sidecar_task": _Block(frozenset({"volume_mount", "identity"}), "sidecar_task"),
    },
)
_SERVICE = _Block(
    frozenset({
        "id", "canary_tags", "enable_tag_override", "address", "canary_meta",
        "tagged_addresses", "task", "on_update", "identity", "weights", "cluster", "kind",
    }),
    "service",
    blocks={"connect": _CONNECT},
    lists={"checks": _CHECK},
)
_TASK = _Block(
    frozenset({
        "vault", "consul", "csi_plugin", "scaling",
        "action", "secret", "schedule", "kind",
    }),
    silent=_ONE_NODE,
    blocks={
        "resources": _Block(frozenset({"device", "numa", "secrets", "iops"}), "resources",
                            blocks={"network": _NETWORK}),
        "restart": _Block(frozenset({"render_templates"}), "restart"),
        "logs": _Block(frozenset({"enabled", "disabled"}), "logs"),
    },
    lists={
        "services": _SERVICE,
        "templates": _Block(frozenset({
            "change_script", "once", "uid", "gid", "vault_grace", "wait", "error_on_missing_key",
        }), "template"),
        "artifacts": _Block(frozenset({"insecure", "chown"}), "artifact"),
        "volume_mounts": _Block(frozenset({"selinux_label"}), "volume_mount"),
    },
)
_GROUP = _Block(
    frozenset({"vault", "shutdown_delay"}),
    silent=_GROUP_ONE_NODE,
    shown={"shutdown_delay": "group shutdown_delay"},
    blocks={"network": _GROUP_NETWORK, "restart": _Block(frozenset({"render_templates"}), "restart")},
    lists={"tasks": _TASK, "services": _SERVICE},
)
_JOB = _Block(
    frozenset({
        "vault", "vault_token", "vault_namespace", "consul_token", "consul_namespace", "id",
        "namespace", "node_pool", "multiregion", "ui",
    }),
    silent=_JOB_ONE_NODE,
    lists={"groups": _GROUP},
)


def drop_unimplemented(document: Any) -> list[str]:
    """Remove the Nomad keys herder does not implement from ``document`` in place;
    return their names, each once, in the order found."""
    dropped: list[str] = []
    job = document.get("job") if isinstance(document, dict) else None
    _visit(job, _JOB, dropped)
    return dropped


def _visit(mapping: Any, block: _Block, dropped: list[str]) -> None:
    if not isinstance(mapping, dict):
        return
    for key in [key for key in mapping if key in block.silent]:
        del mapping[key]
    for key in [key for key in mapping if key in block.drop]:
        del mapping[key]
        name = block.shown.get(key) or (f"{block.name}.{key}" if block.name else key)
        if name not in dropped:
            dropped.append(name)
    for key, child in block.blocks.items():
        _visit(mapping.get(key), child, dropped)
    for key, child in block.lists.items():
        for item in _items(mapping.get(key)):
            _visit(item, child, dropped)


def _items(value: Any) -> Iterator[Any]:
    """The maps of a list, and the content of its dynamic blocks (the maps they will make)."""
    if isinstance(value, list):
        yield from (item.content if isinstance(item, DynamicBlock) else item for item in value)


def host_networking(document: Any) -> list[str]:
    """Set every task-level ``network.mode`` other than ``host`` (``bridge``, ``none``,
    ``cni/NAME``) to ``host``; return the modes changed. (A group's network mode is kept.)"""
    changed: list[str] = []
    job = document.get("job") if isinstance(document, dict) else None
    for group in _maps(job, "groups"):
        networks: list[Any] = []
        for task in _maps(group, "tasks"):
            resources = task.get("resources")
            networks.append(resources.get("network") if isinstance(resources, dict) else None)
        for network in networks:
            mode = network.get("mode") if isinstance(network, dict) else None
            if isinstance(mode, str) and (mode in ("bridge", "none") or mode.startswith("cni/")):
                network["mode"] = HOST_MODE
                if mode not in changed:
                    changed.append(mode)
    return changed


def _maps(parent: Any, key: str) -> list[dict[str, Any]]:
    items = parent.get(key) if isinstance(parent, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def drop_connect_gateways(document: Any) -> dict[int, str]:
    """Remove the groups that are only a Connect gateway (no task; a service whose
    ``connect`` has a ``gateway``) from ``document`` in place; return their indexes and names."""
    job = document.get("job") if isinstance(document, dict) else None
    groups = job.get("groups") if isinstance(job, dict) else None
    if not isinstance(job, dict) or not isinstance(groups, list):
        return {}
    gateways = {index: str(group.get("name", "")) for index, group in enumerate(groups)
                if isinstance(group, dict) and _is_gateway(group)}
    job["groups"] = [group for index, group in enumerate(groups) if index not in gateways]
    return gateways


def _is_gateway(group: dict[str, Any]) -> bool:
    if "tasks" in group:
        return False
    connects = [service.get("connect") for service in _maps(group, "services")]
    return any(isinstance(connect, dict) and "gateway" in connect for connect in connects)
