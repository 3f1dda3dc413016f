"""The difference of two versions of a job in Nomad's ``JobDiff`` shape, as ``nomad job plan`` prints it.

Nomad's diff (``nomad/structs/diff.go``) compares two jobs field by field:
a primitive is a *field* (``Old`` and ``New`` as text), a block an *object*
holding fields and objects, groups and tasks are matched by name; each is
``Added``, ``Deleted``, ``Edited`` or ``None``. The fields of an edited object
are given in context (the unchanged ones too, ``None``), as Nomad's plan asks;
the fields of a job, a group or a task only when they changed. Maps of the
user's own (a driver's ``Config``, ``Env``, ``Meta``) are flattened into
fields named as Nomad names them (``args[1]``, ``a.b``).

Both jobs are in Nomad's JSON; what Nomad's servers set (status, indexes,
versions) is no part of a difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Job = Mapping[str, Any]

ADDED, DELETED, EDITED, NONE = "Added", "Deleted", "Edited", "None"

# Set by Nomad's servers, or matched and shown on their own (groups, tasks).
_JOB_SKIPPED = frozenset({
    "ID", "Status", "StatusDescription", "Version", "Stable", "SubmitTime", "CreateIndex", "ModifyIndex",
    "JobModifyIndex", "NomadTokenID", "VaultToken", "ConsulToken", "TaskGroups", "ParentID", "Update",
})
_NAMED_SKIPPED = frozenset({"Name", "Tasks"})
_FLATTENED = frozenset({"Config", "Env", "Meta", "CanaryMeta", "GetterOptions", "GetterHeaders", "Header"})
_SINGULAR = {"Services": "Service", "Checks": "Check", "Templates": "Template", "Artifacts": "Artifact",
             "Constraints": "Constraint", "Affinities": "Affinity", "Spreads": "Spread", "Networks": "Network",
             "ReservedPorts": "Static Port", "DynamicPorts": "Dynamic Port", "Volumes": "Volume",
             "VolumeMounts": "VolumeMount", "Devices": "Device"}


def job_diff(old: Job | None, new: Job | None) -> dict[str, Any]:
    """The ``JobDiff`` of job ``old`` (None: not registered) to job ``new`` (None: deregistered)."""
    either = new if new is not None else old or {}
    fields, objects = _parts(old, new, _JOB_SKIPPED, contextual=False)
    groups = [_group_diff(a, b) for a, b in _matched(old, new, "TaskGroups")]
    return {"Type": _kind(old, new, fields, objects, groups), "ID": either.get("ID") or either.get("Name") or "",
            "Fields": fields or None, "Objects": objects or None, "TaskGroups": groups or None}


def _group_diff(old: Job | None, new: Job | None) -> dict[str, Any]:
    fields, objects = _parts(old, new, _NAMED_SKIPPED, contextual=False)
    tasks = [_task_diff(a, b) for a, b in _matched(old, new, "Tasks")]
    return {"Type": _kind(old, new, fields, objects, tasks), "Name": _name(old, new), "Fields": fields or None,
            "Objects": objects or None, "Tasks": tasks or None, "Updates": None}


def _task_diff(old: Job | None, new: Job | None) -> dict[str, Any]:
    fields, objects = _parts(old, new, _NAMED_SKIPPED, contextual=False)
    return {"Type": _kind(old, new, fields, objects, []), "Name": _name(old, new), "Fields": fields or None,
            "Objects": objects or None, "Annotations": None}


def _kind(old: Any, new: Any, *parts: list[dict[str, Any]]) -> str:
    if old is None:
        return ADDED
    if new is None:
        return DELETED
    return EDITED if any(part["Type"] != NONE for items in parts for part in items) else NONE


def _name(old: Job | None, new: Job | None) -> str:
    return str((new if new is not None else old or {}).get("Name") or "")


def _matched(old: Job | None, new: Job | None, key: str) -> list[tuple[Job | None, Job | None]]:
    """The items of list ``key`` of ``old`` and ``new`` paired by name, sorted by it."""
    olds, news = _by_name((old or {}).get(key)), _by_name((new or {}).get(key))
    return [(olds.get(name), news.get(name)) for name in sorted(olds.keys() | news.keys())]


def _by_name(items: Any) -> dict[str, Job]:
    return {str(item.get("Name") or ""): item for item in items or () if isinstance(item, Mapping)}


def _parts(old: Job | None, new: Job | None, skipped: frozenset[str], *,
           contextual: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The field and object diffs of two maps (either may be missing), sorted by name."""
    a, b = old or {}, new or {}
    fields: list[dict[str, Any]] = []
    objects: list[dict[str, Any]] = []
    for key in sorted((a.keys() | b.keys()) - skipped):
        x, y = a.get(key), b.get(key)
        if key in _FLATTENED:
            objects += _object(key, _flat(x), _flat(y), frozenset(), contextual=True)
        elif _is_map(x) or _is_map(y):
            objects += _object(key, x, y, frozenset(), contextual=True)
        elif _is_list(x) or _is_list(y):
            objects += _list(key, x or [], y or [])
        else:
            fields += _field(key, x, y, contextual)
    return fields, objects


def _object(name: str, old: Any, new: Any, skipped: frozenset[str], *, contextual: bool) -> list[dict[str, Any]]:
    old, new = (old or None), (new or None)
    if old is None and new is None:
        return []
    fields, objects = _parts(old, new, skipped, contextual=contextual and old is not None and new is not None)
    kind = _kind(old, new, fields, objects)
    if kind == NONE:
        return []
    return [{"Type": kind, "Name": name, "Fields": fields or None, "Objects": objects or None}]


def _list(key: str, old: list[Any], new: list[Any]) -> list[dict[str, Any]]:
    """A list of maps as objects matched by position (by name where they have one); of primitives as
    one object of the values added and deleted (Nomad's set difference)."""
    if all(_is_map(item) for item in old + new):
        name = _SINGULAR.get(key, key)
        if all(item.get("Name") for item in old + new):
            olds, news = _by_name(old), _by_name(new)
            pairs = [(olds.get(n), news.get(n)) for n in sorted(olds.keys() | news.keys())]
        else:
            pairs = [(old[i] if i < len(old) else None, new[i] if i < len(new) else None)
                     for i in range(max(len(old), len(new)))]
        return [diff for a, b in pairs for diff in _object(name, a, b, frozenset(), contextual=True)]
    old_values, new_values = [_text(v) for v in old], [_text(v) for v in new]
    # Looked up in sets: a list's membership made this quadratic, and a job of 4 MiB (half a million
    # datacenters, tags) planned against one like it held a worker thread for hours.
    old_set, new_set = set(old_values), set(new_values)
    fields = [{"Type": DELETED, "Name": key, "Old": v, "New": "", "Annotations": None}
              for v in old_values if v not in new_set]
    fields += [{"Type": ADDED, "Name": key, "Old": "", "New": v, "Annotations": None}
               for v in new_values if v not in old_set]
    if not fields:
        return []
    kind = ADDED if not old else DELETED if not new else EDITED
    return [{"Type": kind, "Name": key, "Fields": sorted(fields, key=lambda f: (f["Old"], f["New"])), "Objects": None}]


def _field(name: str, old: Any, new: Any, contextual: bool) -> list[dict[str, Any]]:
    x, y = _text(old), _text(new)
    if x == y:
        return [{"Type": NONE, "Name": name, "Old": x, "New": y, "Annotations": None}] if contextual and x else []
    kind = ADDED if not x else DELETED if not y else EDITED
    return [{"Type": kind, "Name": name, "Old": x, "New": y, "Annotations": None}]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A map of the user's own, flattened as Nomad's flatmap: ``a.b`` for maps, ``a[0]`` for lists."""
    out: dict[str, Any] = {}
    items = value.items() if _is_map(value) else enumerate(value) if _is_list(value) else ()
    for key, item in items:
        name = f"{prefix}[{key}]" if isinstance(key, int) else f"{prefix}.{key}" if prefix else str(key)
        if _is_map(item) or _is_list(item):
            out |= _flat(item, name)
        else:
            out[name] = item
    return out


def _text(value: Any) -> str:
    """A primitive as Nomad prints it in a diff; nothing (null) is the empty string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _is_map(value: Any) -> bool:
    return isinstance(value, Mapping)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)
