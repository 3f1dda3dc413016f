"""What each allocation replaces (``previous``): written with the replacement, read by its
reschedule tracker, by what carries ``alloc/data`` over and by the garbage collector."""

from __future__ import annotations

import json
from typing import Any

from herder.state.records import PreviousRecord
from herder.state.tables.rows import Table, as_params, columns, decode, insert


class Previous(Table):
    """The link from a replacement to the allocation it replaces, with its reschedule tracker."""

    def put_previous(self, record: PreviousRecord) -> None:
        """Store what allocation ``record.alloc_id`` (stored already) replaces."""
        params = {**as_params(record), "events": json.dumps(record.events)}
        self._db.write(lambda: self._db.execute(
            insert("previous", PreviousRecord) + " ON CONFLICT (alloc_id) DO UPDATE SET "
            "previous = excluded.previous, events = excluded.events", params), retry=False)

    def previous(self, alloc_id: str) -> PreviousRecord | None:
        """What allocation ``alloc_id`` replaces; None for one that replaces none."""
        rows = self._db.query(f"SELECT {columns(PreviousRecord)} FROM previous WHERE alloc_id = ?", (alloc_id,))
        return _decode(rows[0]) if rows else None

    def replacement(self, alloc_id: str) -> str | None:
        """The allocation that replaced allocation ``alloc_id`` (the latest, if several did)."""
        rows = self._db.query("SELECT alloc_id FROM previous WHERE previous = ? ORDER BY rowid DESC LIMIT 1",
                              (alloc_id,))
        return str(rows[0][0]) if rows else None

    def awaited(self) -> set[str]:
        """The allocations a replacement not started yet replaces: what it may still take from them."""
        rows = self._db.query("SELECT previous.previous FROM previous JOIN allocs ON allocs.id = previous.alloc_id "
                              "WHERE allocs.status = 'pending'")
        return {str(row[0]) for row in rows}


def _decode(row: tuple[Any, ...]) -> PreviousRecord:
    values = decode(PreviousRecord, row)
    return PreviousRecord(**{**values, "events": json.loads(values["events"])})
