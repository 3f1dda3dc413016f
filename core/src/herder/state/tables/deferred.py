"""The deferred work (``deferred``): what is to be done later, by kind and key, and when it is due."""

from __future__ import annotations

import json
from typing import Any

from herder.state.records import Deferred
from herder.state.tables.rows import Table, as_params, columns, decode, insert


class DeferredWork(Table):
    """Work to do later even if this process dies first (removing an image after a delay, say)."""

    def defer(self, work: Deferred, *, wait: bool = True) -> None:
        """Record work to do later; it replaces work of the same kind and key."""
        params = _encode_deferred(work)
        self._db.write(lambda: self._db.execute(
            insert("deferred", Deferred)
            + " ON CONFLICT (kind, key) DO UPDATE SET payload = excluded.payload, due = excluded.due", params),
            wait=wait)

    def deferred(self, kind: str | None = None) -> list[Deferred]:
        """The deferred work (of one kind if given), soonest first."""
        where, params = ("1", ()) if kind is None else ("kind = ?", (kind,))
        rows = self._db.query(f"SELECT {columns(Deferred)} FROM deferred WHERE {where} ORDER BY due, kind, key",
                              params)
        return [_decode_deferred(row) for row in rows]

    def due(self, now: float) -> list[Deferred]:
        """The deferred work due at ``now`` (epoch seconds), soonest first."""
        rows = self._db.query(f"SELECT {columns(Deferred)} FROM deferred WHERE due <= ? ORDER BY due, kind, key",
                              (now,))
        return [_decode_deferred(row) for row in rows]

    def done(self, kind: str, key: str, *, wait: bool = True) -> None:
        """Forget deferred work once it is done (nothing if it is not stored)."""
        self._db.write(lambda: self._db.execute("DELETE FROM deferred WHERE kind = ? AND key = ?", (kind, key)),
                       wait=wait)


def _encode_deferred(work: Deferred) -> dict[str, Any]:
    return {**as_params(work), "payload": json.dumps(work.payload)}


def _decode_deferred(row: tuple[Any, ...]) -> Deferred:
    values = decode(Deferred, row)
    return Deferred(**{**values, "payload": json.loads(values["payload"])})
