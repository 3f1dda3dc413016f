"""The allocations' network namespaces (``networks``): written before a namespace is made, removed
after it is gone, so that a herder started after a crash finds every one."""

from __future__ import annotations

import json
from typing import Any

from herder.state.records import NetworkRecord
from herder.state.tables.rows import LIVE, Table, as_params, columns, decode, dump_optional, insert


class Networks(Table):
    """Each allocation's network namespace and CNI attachment, by allocation."""

    def put_network(self, record: NetworkRecord) -> None:
        """Store (or replace) the record of an allocation's network; committed before this returns."""
        params = {**as_params(record), "labels": json.dumps(record.labels),
                  "port_mappings": json.dumps(record.port_mappings), "result": dump_optional(record.result)}
        self._db.write(lambda: self._db.execute(
            insert("networks", NetworkRecord).replace("INSERT", "INSERT OR REPLACE", 1), params), retry=False)

    def network(self, alloc_id: str) -> NetworkRecord | None:
        rows = self._db.query(f"SELECT {columns(NetworkRecord)} FROM networks WHERE alloc_id = ?", (alloc_id,))
        return _decode(rows[0]) if rows else None

    def stale_networks(self) -> list[NetworkRecord]:
        """The networks of allocations that are over (or gone from the database): nothing of them runs."""
        rows = self._db.query(
            f"SELECT {columns(NetworkRecord, table='networks')} FROM networks LEFT JOIN allocs "
            f"ON allocs.id = networks.alloc_id WHERE allocs.id IS NULL OR allocs.status NOT IN ({LIVE}) "
            "ORDER BY networks.rowid")
        return [_decode(row) for row in rows]

    def remove_network(self, alloc_id: str) -> None:
        self._db.write(lambda: self._db.execute("DELETE FROM networks WHERE alloc_id = ?", (alloc_id,)))


def _decode(row: tuple[Any, ...]) -> NetworkRecord:
    values = decode(NetworkRecord, row)
    result = values["result"]
    return NetworkRecord(**{**values, "labels": json.loads(values["labels"]),
                            "port_mappings": json.loads(values["port_mappings"]),
                            "result": None if result is None else json.loads(result)})
