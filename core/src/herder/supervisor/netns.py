"""Starting a process inside a network namespace (an allocation's, ``network { mode = "bridge" }``).

``setns(2)`` moves only the calling thread, and a child forked by that thread
is born in the thread's namespace. So the thread that starts the process
enters the namespace just for the ``fork`` and comes straight back: the child
keeps the namespace, and is started with every other property as usual (its
user, groups, session), which a ``setns`` in the child would come too late
for, once it has given up root.

Standard library only: the supervisor process imports this module.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
from collections.abc import Iterator
from pathlib import Path

CLONE_NEWNET = 0x40000000


class NamespaceError(Exception):
    """The namespace cannot be entered (no such path, not a network namespace, no privilege)."""


@contextlib.contextmanager
def entered(path: str | Path | None) -> Iterator[None]:
    """Run the body in the network namespace at ``path`` (None: where the thread is), then come back.

    ``path`` is a file of herder's own (a bind mount under ``/var/run/netns``,
    or ``/proc/PID/ns/net`` of a driver's pause process), never a path a task
    can write to; ``setns`` refuses anything but a network namespace.

    :raises NamespaceError: when it cannot be entered, with the reason.
    """
    if path is None:
        yield
        return
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        try:
            target = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as err:
            raise NamespaceError(f"cannot open the network namespace {path}: {err.strerror}") from None
        try:
            _setns(target)
        except OSError as err:
            raise NamespaceError(f"cannot enter the network namespace {path}: {err.strerror}") from None
        finally:
            os.close(target)
        try:
            yield
        finally:
            # Cannot fail (the thread came from there, with the privilege to go back); if it did,
            # the thread would run on in the task's namespace, so nothing may go on.
            _setns(home)
    finally:
        os.close(home)


def _setns(fd: int) -> None:
    setns = getattr(os, "setns", None)  # Python 3.12+
    if setns is not None:
        setns(fd, CLONE_NEWNET)
        return
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
