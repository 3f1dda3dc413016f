"""Which herder processes on a data dir are alive.

Each client holds an exclusive ``flock`` on ``sessions/<session>.lock`` for
as long as its process lives; the kernel drops it when the process dies,
however it dies. An allocation whose owning session holds no lock any more
is an orphan that another herder may take over.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

SESSIONS_DIR = "sessions"


def _path(data_dir: Path, session: str) -> Path:
    return data_dir / SESSIONS_DIR / f"{session}.lock"


class SessionLock:
    """Marks ``session`` alive on ``data_dir`` until :meth:`release` or the process's death."""

    def __init__(self, data_dir: Path, session: str) -> None:
        self.path = _path(data_dir, session)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def release(self) -> None:
        if self._fd >= 0:
            self.path.unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = -1


def is_alive(data_dir: Path, session: str) -> bool:
    """Whether the herder process of ``session`` still runs."""
    try:
        fd = os.open(_path(data_dir, session), os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return True
    _path(data_dir, session).unlink(missing_ok=True)  # a dead session's lock file, while we hold it
    os.close(fd)
    return False
