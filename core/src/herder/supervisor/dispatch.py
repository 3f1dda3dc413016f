"""The supervisor's RPC dispatch: each request line of a client, checked and carried out.

The wire format is :mod:`herder.supervisor.protocol`'s. Every request is
answered, ``ok: true`` with what it returns, or ``ok: false`` with an
``error`` that says why (``unknown: true`` for a process the supervisor does
not know); a bad request is refused, never the end of the supervisor.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import json
import logging
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder.supervisor.logfiles import STREAMS
from herder.supervisor.processes import CannotStart, Command, Proc, Processes, RotatingLogs
from herder.supervisor.sessions import Conn

log = logging.getLogger("herder.supervisor")

_SIGNALS = frozenset(int(sig) for sig in signal.valid_signals())


class Refused(Exception):
    """A request the supervisor does not carry out; its reply is ``ok: false`` with this message."""

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.extra = extra


class Dispatcher:
    """The operations of the protocol, carried out on ``procs`` for the connection that asks."""

    def __init__(self, procs: Processes) -> None:
        self._procs = procs
        self._ops: dict[str, Callable[[Conn, dict[str, Any]], dict[str, Any] | None]] = {
            "hello": self._hello, "spawn": self._spawn, "attach": self._attach, "signal": self._signal,
            "stop": self._stop, "forget": self._forget, "list": self._list, "bye": self._bye,
        }

    def handle(self, conn: Conn, line: bytes) -> None:
        """Carry out one request line of ``conn``, and send the reply."""
        rid = None
        try:
            message = json.loads(line)
            if not isinstance(message, dict):
                raise Refused("a request is a JSON object")
            rid = message.get("rid")
            op = message.get("op")
            handler = self._ops.get(op) if isinstance(op, str) else None
            if handler is None:
                raise Refused(f"unknown op {op!r}")
            if conn.session is None and op != "hello":
                raise Refused("the first request must be hello")
            result = handler(conn, message) or {}
        except Refused as err:
            conn.send({"rid": rid, "ok": False, "error": str(err), **err.extra})
        except ValueError as err:  # json.JSONDecodeError included
            conn.send({"rid": rid, "ok": False, "error": f"bad request: {err}"})
        except Exception as err:
            log.exception("request %r failed", line[:200])
            conn.send({"rid": rid, "ok": False, "error": f"internal error: {err!r}"})
        else:
            conn.send({"rid": rid, "ok": True, **result})

    def _hello(self, conn: Conn, message: dict[str, Any]) -> dict[str, Any]:
        if conn.session is not None:
            raise Refused("hello was already said")
        session = _field(message, "session", str)
        keep = _field(message, "keep", bool)
        on_lost = message.get("on_lost")
        if on_lost is not None:
            _command(on_lost, "on_lost")
        conn.session, conn.keep, conn.on_lost = session, keep, on_lost
        return {"pid": os.getpid()}

    def _spawn(self, conn: Conn, message: dict[str, Any]) -> dict[str, Any]:
        id = _field(message, "id", str)
        if id in self._procs.procs:
            raise Refused(f"process {id} exists already")
        command = Command(
            id=id, argv=_command(message, "spawn")["argv"], env=_field(message, "env", dict),
            cwd=_field(message, "cwd", str, optional=True), user=_field(message, "user", str, optional=True),
            groups=_groups(message),
            stop_signal=_signal_field(message, "stop_signal"),
            kill_timeout=float(_field(message, "kill_timeout", (int, float))),
            netns=_field(message, "netns", str, optional=True),
        )
        logs = _field(message, "logs", dict)
        outputs: RotatingLogs | list[str] = _field(logs, "paths", list, optional=True)
        if outputs is None:
            outputs = RotatingLogs(dir=Path(_field(logs, "dir", str)), task=_field(logs, "task", str),
                                   max_files=_field(logs, "max_files", int),
                                   max_file_size=_field(logs, "max_file_size", int))
        elif len(outputs) != len(STREAMS) or not all(isinstance(path, str) for path in outputs):
            raise Refused("logs.paths must name a stdout and a stderr file")
        try:
            return self._procs.spawn(command, outputs, conn).info()
        except CannotStart as err:
            raise Refused(str(err)) from err

    def _attach(self, conn: Conn, message: dict[str, Any]) -> dict[str, Any]:
        proc = self._known(message)
        proc.owner = conn
        return proc.info()

    def _signal(self, conn: Conn, message: dict[str, Any]) -> None:
        self._procs.signal(self._known(message), _signal_field(message))

    def _stop(self, conn: Conn, message: dict[str, Any]) -> None:
        proc = self._known(message)
        self._procs.stop(proc, _signal_field(message), float(_field(message, "timeout", (int, float))))

    def _forget(self, conn: Conn, message: dict[str, Any]) -> None:
        proc = self._procs.procs.get(_field(message, "id", str))
        if proc is None:
            return  # forgotten already
        if proc.exit is None:
            raise Refused(f"process {proc.id} has not exited")
        self._procs.forget(proc)

    def _list(self, conn: Conn, message: dict[str, Any]) -> dict[str, Any]:
        return {"procs": [
            {"id": proc.id, **proc.info(), "session": proc.owner.session if proc.owner else None,
             "running": proc.returncode is None}
            for proc in self._procs.procs.values()
        ], "logged_bytes": self._procs.logged}

    def _bye(self, conn: Conn, message: dict[str, Any]) -> None:
        conn.said_bye = True
        self._procs.disown(conn)

    def _known(self, message: dict[str, Any]) -> Proc:
        id = _field(message, "id", str)
        proc = self._procs.procs.get(id)
        if proc is None:
            raise Refused(f"no process {id}", unknown=True)
        return proc


def _field(message: dict[str, Any], name: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
    value = message.get(name)
    if value is None and optional:
        return None
    # bool is an int, but never a valid number here
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise Refused(f"bad request: {name} is {value!r}")
    return value


def _groups(message: dict[str, Any]) -> tuple[int, ...]:
    """A spawn's ``groups``: group ids (none if not given)."""
    groups = _field(message, "groups", list, optional=True) or []
    if not all(isinstance(gid, int) and not isinstance(gid, bool) and gid >= 0 for gid in groups):
        raise Refused(f"bad request: groups is {groups!r}")
    return tuple(groups)


def _signal_field(message: dict[str, Any], name: str = "signal") -> int:
    sig: int = _field(message, name, int)
    if sig not in _SIGNALS:
        raise Refused(f"bad request: no signal {sig}")
    return sig


def _command(spec: Any, what: str) -> dict[str, Any]:
    """Check a command: ``argv`` a non-empty list of strings, ``env`` (if given) strings to strings."""
    if not isinstance(spec, dict):
        raise Refused(f"bad request: {what} is {spec!r}")
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(arg, str) for arg in argv):
        raise Refused(f"bad request: {what} argv is {argv!r}")
    env = spec.get("env")
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
    ):
        raise Refused(f"bad request: {what} env must map strings to strings")
    return spec
