"""What the supervisor and its clients share: where it listens, who may talk to it, the wire format.

It listens on a Unix socket in a 0700 directory of the data dir, which no
task's filesystem holds (not on an abstract socket, which every process in
the host's network namespace could reach, tasks sharing it included).

Messages are JSON objects, one per line. A request is ``{"op": ..., "rid":
N, ...}`` and its reply ``{"rid": N, "ok": true, ...}`` or ``{"rid": N, "ok":
false, "error": "message"}``; the supervisor also pushes events, ``{"event":
"exit", "id", "exit_code", "signal"}``, ``{"event": "unsafe_log_file", "id",
"message"}`` (something a task planted among its log files was removed, not
followed) and ``{"event": "logs_dropped", "id", "stream", "message", "bytes"}``
(output the log files cannot take is being dropped, ``bytes`` null; or how many
bytes were, once writing works again or the output ended).

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import struct
from pathlib import Path
from typing import Any

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


SOCKET_NAME = "supervisor.sock"
"""The supervisor's socket, in :func:`state_dir`."""

LOCK_NAME = "supervisor.lock"
"""The file a running supervisor holds locked (``flock``), in :func:`state_dir`: the singleton's lock."""


class Squatted(Exception):
    """Something not this user's own holds a name of the supervisor (its directory or its socket)."""


def state_dir(data_dir: Path) -> Path:
    """The supervisor's own directory in the data dir: mode 0700, no task sees it."""
    return data_dir / "supervisor"


def log_path(data_dir: Path) -> Path:
    """Where the supervisor logs its warnings (and ``on_lost`` commands their output)."""
    return state_dir(data_dir) / "supervisor.log"


def open_state_dir(data_dir: Path) -> int:
    """A descriptor of the supervisor's directory of ``data_dir``, made first if need be.

    The directory must be a real directory (not a link) of this user; it is
    made mode 0700 (older herders made it with the umask's mode), so that
    only this user (and root) can reach the socket in it.

    :raises Squatted: when it is a link, not a directory, or another user's.
    """
    path = state_dir(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    parent = os.open(data_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path.name, 0o700, dir_fd=parent)
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        except OSError as err:
            if err.errno in (errno.ELOOP, errno.ENOTDIR):
                raise Squatted(f"{path} is not a directory (a link, or a file): remove it") from None
            raise
    finally:
        os.close(parent)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        os.close(fd)
        raise Squatted(f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): remove it")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.fchmod(fd, 0o700)
    return fd


def socket_address(dir_fd: int) -> str:
    """The supervisor's socket as ``bind`` and ``connect`` take it, while ``dir_fd`` (its directory) is open.

    Named through the descriptor: the path of a Unix socket is limited to
    107 bytes, which a data dir deep in a temporary directory would exceed;
    this one stays short, and names the very directory that was checked.
    """
    return f"/proc/self/fd/{dir_fd}/{SOCKET_NAME}"


def check_socket_name(dir_fd: int, data_dir: Path) -> bool:
    """Whether a socket of this user is at :data:`SOCKET_NAME` (False: nothing is).

    :raises Squatted: when something else is there (a file, or another user's socket).
    """
    try:
        st = os.stat(SOCKET_NAME, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    path = state_dir(data_dir) / SOCKET_NAME
    if not stat.S_ISSOCK(st.st_mode):
        raise Squatted(f"{path} is not a socket: remove it")
    if st.st_uid != os.geteuid():
        raise Squatted(f"{path} belongs to uid {st.st_uid}, not to this user (uid {os.geteuid()}): remove it")
    return True


def encode(message: dict[str, Any]) -> bytes:
    """One message as its line on the wire."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """The pid, uid and gid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    pid, uid, gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return pid, uid, gid


def peer_allowed(peer_uid: int, own_uid: int) -> bool:
    """Whether a process of ``peer_uid`` may talk to a supervisor (or client) of ``own_uid``.

    The same user, or root. The socket's directory already keeps others
    out; both ends check all the same: the supervisor its clients, and each
    client its supervisor (so no other user can stand in for it and receive
    the tasks' environments).
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
