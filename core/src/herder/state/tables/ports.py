"""The ports the allocations hold (``ports``), written with an allocation by ``put_alloc``."""

from __future__ import annotations

from herder.state.records import PortRecord
from herder.state.tables.rows import LIVE, Table, columns, decode


class Ports(Table):
    """The host ports each allocation holds, by owner (a task or the group) and label."""

    def ports(self, alloc_id: str | None = None) -> list[PortRecord]:
        """The ports of an allocation; with no ``alloc_id``, those of every
        live allocation: what a restarted client must hold on to."""
        selected = columns(PortRecord, table="ports")
        if alloc_id is None:
            rows = self._db.query(f"SELECT {selected} FROM ports JOIN allocs ON allocs.id = ports.alloc_id "
                                  f"WHERE allocs.status IN ({LIVE}) ORDER BY ports.rowid")
        else:
            rows = self._db.query(f"SELECT {selected} FROM ports WHERE alloc_id = ? ORDER BY rowid", (alloc_id,))
        return [PortRecord(**decode(PortRecord, row)) for row in rows]

    def release_ports(self, alloc_id: str, *, wait: bool = True) -> None:
        """Forget the ports of an allocation."""
        self._db.write(lambda: self._db.execute("DELETE FROM ports WHERE alloc_id = ?", (alloc_id,)), wait=wait)
