"""Nomad stanzas herder accepts but does not implement.

They are dropped where Nomad allows them, and named in a single warning; the
same names anywhere else are unknown keys like any other.
"""

from __future__ import annotations

from typing import Any

_SHARED = {"constraint", "affinity", "vault"}
_JOB = _SHARED | {"spread", "update", "migrate", "reschedule", "vault_token", "periodic", "parameterized"}
_JOB |= {"priority", "all_at_once", "id", "namespace"}
_GROUP = _SHARED | {"spread", "update", "migrate", "reschedule", "ephemeral_disk", "volume", "scaling"}
_TASK = _SHARED | {"dispatch_payload", "csi_plugin", "scaling", "volume_mount"}
_NETWORK = {"mbits"}  # Nomad 0.x network bandwidth, long ignored by Nomad itself


def drop_unimplemented(document: Any) -> list[str]:
    """Remove unimplemented stanzas from ``document`` in place; return their names."""
    dropped: list[str] = []
    job = document.get("job") if isinstance(document, dict) else None
    _drop(job, _JOB, dropped)
    for group in _list_of_maps(job, "groups"):
        _drop(group, _GROUP, dropped)
        _drop(group.get("network"), _NETWORK, dropped)
        for task in _list_of_maps(group, "tasks"):
            _drop(task, _TASK, dropped)
            resources = task.get("resources")
            if isinstance(resources, dict):
                _drop(resources.get("network"), _NETWORK, dropped)
    return dropped


def _list_of_maps(parent: Any, key: str) -> list[dict[str, Any]]:
    items = parent.get(key) if isinstance(parent, dict) else None
    return [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []


def _drop(mapping: Any, names: set[str], dropped: list[str]) -> None:
    if not isinstance(mapping, dict):
        return
    for name in [key for key in mapping if key in names]:
        del mapping[name]
        if name not in dropped:
            dropped.append(name)
