"""What the supervisor and its clients share: where it listens, who may talk to it, the wire format.

Messages are JSON objects, one per line. A request is ``{"op": ..., "rid":
N, ...}`` and its reply ``{"rid": N, "ok": true, ...}`` or ``{"rid": N, "ok":
false, "error": "message"}``; the supervisor also pushes events, ``{"event":
"exit", "id", "exit_code", "signal"}``.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import struct
from pathlib import Path
from typing import Any

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def address(data_dir: Path) -> bytes:
    """The supervisor's socket for ``data_dir``: a Linux abstract Unix socket.

    Abstract, so no path length limit applies and nothing is left on disk;
    named after the data dir's real path, so every spelling of it meets the
    same supervisor.
    """
    digest = hashlib.sha256(os.fsencode(os.path.realpath(data_dir))).hexdigest()[:20]
    return b"\0herder-supervisor-" + digest.encode()


def state_dir(data_dir: Path) -> Path:
    """The supervisor's own directory in the data dir."""
    return data_dir / "supervisor"


def log_path(data_dir: Path) -> Path:
    """Where the supervisor logs its warnings (and ``on_lost`` commands their output)."""
    return state_dir(data_dir) / "supervisor.log"


def encode(message: dict[str, Any]) -> bytes:
    """One message as its line on the wire."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """The pid, uid and gid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return pid, uid, gid


def peer_allowed(peer_uid: int, own_uid: int) -> bool:
    """Whether a process of ``peer_uid`` may talk to a supervisor (or client) of ``own_uid``.

    The same user, or root. An abstract socket has no file permissions, so
    both ends check: the supervisor its clients, and each client its
    supervisor (so no other user can stand in for it and receive the tasks'
    environments).
    """
    return peer_uid in (own_uid, 0)


def process_start_time(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (field 22 of ``/proc/PID/stat``).

    With the pid, it names a process for good: a reused pid has another start
    time. None when there is no such process.
    """
    stat = _stat(pid)
    return None if stat is None else int(stat[22 - 3])


def process_alive(pid: int, start_time: int) -> bool:
    """Whether the process that started as ``pid`` at ``start_time`` still runs (a zombie does not)."""
    stat = _stat(pid)
    return stat is not None and int(stat[22 - 3]) == start_time and stat[0] not in (b"Z", b"X")


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` from the third (the state) on."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from its closing one.
    return text[text.rindex(b")") + 2 :].split()
