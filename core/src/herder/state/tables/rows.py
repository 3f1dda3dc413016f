"""Rows and records: the columns of a record's table, and the base of the tables' classes.

A record's fields are its table's columns, by name and in order ("index" and
"to" are SQL keywords, hence the quotes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from herder.state.database import Database
from herder.state.records import LIVE_STATUSES

LIVE = ", ".join(f"'{status}'" for status in LIVE_STATUSES)
"""The live statuses of an allocation, as an SQL list: ``status IN ({LIVE})``."""


class Table:
    """The base of the tables' classes: the commit engine their statements go through."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def _update(self, table: str, keys: Mapping[str, Any], changes: Mapping[str, Any], missing: str,
                wait: bool) -> None:
        """Set the columns ``changes`` names (checked names) in the row of
        ``table`` that ``keys`` selects; KeyError(missing) if there is none."""
        assignments = ", ".join(f'"{name}" = :{name}' for name in changes)
        # The key parameters are prefixed so that they never clash with a changed column.
        where = " AND ".join(f'"{name}" = :key_{name}' for name in keys)
        params = {**changes, **{f"key_{name}": value for name, value in keys.items()}}

        def apply() -> None:
            if self._db.execute(f"UPDATE {table} SET {assignments} WHERE {where}", params).rowcount == 0:
                raise KeyError(missing)

        self._db.write(apply, wait=wait)


def columns(record_type: type, table: str | None = None) -> str:
    prefix = f"{table}." if table else ""
    return ", ".join(f'{prefix}"{f.name}"' for f in fields(record_type))


def insert(table: str, record_type: type) -> str:
    """An INSERT of a record given as named parameters."""
    values = ", ".join(f":{f.name}" for f in fields(record_type))
    return f"INSERT INTO {table} ({columns(record_type)}) VALUES ({values})"


def as_params(record: Any) -> dict[str, Any]:
    """A record's fields, as the named parameters of :func:`insert`."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def decode(record_type: type, row: tuple[Any, ...]) -> dict[str, Any]:
    """A row selected with ``columns(record_type)``, as the record's keyword arguments."""
    return {f.name: value for f, value in zip(fields(record_type), row, strict=True)}


def check_names(method: str, changes: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(changes.keys() - allowed)
    if unknown:
        raise TypeError(f"{method}() cannot change {', '.join(unknown)}; it changes {', '.join(sorted(allowed))}")


def dump_optional(value: Any) -> str | None:
    return None if value is None else json.dumps(value)
