"""Answers' JSON, encoded once while what they show is unchanged.

A client of Nomad's API polls: the command line's monitors, ``nomad alloc status`` in a loop, a dashboard
asking for a job's allocations every second. Most of those reads find nothing changed, and building an
allocation's shape (its tasks' states and events, its deployment, its job's version) and encoding it
cost far more than the HTTP around it. So the shapes of an allocation are kept, encoded, with the
*signature* of what they were built from (:meth:`Memo.get`); a read whose signature is the same gets
the same bytes.

A read whose answer is made of kept shapes alone is best answered on the event loop: a round trip through
the thread pool would cost it more than the answer. :func:`on_loop` tries it there, and gives up (for the
thread pool) as soon as a shape would have to be built.
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import pydantic_core

SIZE = 4096
MAX_BYTES = 16 << 20
"""The most shapes kept, and the most bytes they may hold together (an allocation's carries its job): beyond
either, the least recently read goes (an allocation collected is never read again)."""


T = TypeVar("T")

_ON_LOOP = contextvars.ContextVar("on_loop", default=False)
"""Whether the shapes read now are read on the event loop, where none is built."""


class Encoded(bytes):
    """JSON already encoded, put in an answer as it is."""


class Unkept(Exception):
    """A shape must be built: not on the event loop."""


def on_loop(read: Callable[[], T]) -> T | None:
    """``read()`` where every shape it reads is kept; None as soon as one would have to be built."""
    token = _ON_LOOP.set(True)
    try:
        return read()
    except Unkept:
        return None
    finally:
        _ON_LOOP.reset(token)


def encode(body: Any) -> bytes:
    """``body`` as JSON: itself if :class:`Encoded`, a list of them joined, anything else (models,
    dicts, lists of them) encoded by pydantic's serializer (in Rust, several times ``json.dumps``')."""
    if isinstance(body, Encoded):
        return body
    if isinstance(body, list) and body and all(isinstance(item, Encoded) for item in body):
        return b"[" + b",".join(body) + b"]"
    return pydantic_core.to_json(body)


class Memo:
    """Shapes by key, each with the signature it was built at. Thread-safe (answers are built in the
    thread pool): two reads that miss at once both build, the later one is kept."""

    def __init__(self, size: int = SIZE, max_bytes: int = MAX_BYTES) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, tuple[Any, Encoded]] = OrderedDict()
        self._bytes = 0

    def get(self, key: Hashable, signature: Any, build: Callable[[], Any]) -> Encoded:
        """The shape of ``key`` at ``signature``: kept from an earlier read at an equal signature, else
        ``build()`` encoded (and kept).

        :raises Unkept: it must be built, within :func:`on_loop`.
        """
        with self._lock:
            found = self._kept.get(key)
            if found is not None and found[0] == signature:
                self._kept.move_to_end(key)
                return found[1]
        if _ON_LOOP.get():
            raise Unkept(key)
        encoded = Encoded(encode(build()))
        with self._lock:
            if (replaced := self._kept.pop(key, None)) is not None:
                self._bytes -= len(replaced[1])
            self._kept[key] = (signature, encoded)
            self._bytes += len(encoded)
            while len(self._kept) > self.size or self._bytes > self.max_bytes:
                self._bytes -= len(self._kept.popitem(last=False)[1][1])
        return encoded
