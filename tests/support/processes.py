"""The process table: which processes a test left behind."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.waiting import TIMEOUT, poll


def processes_using(path: Path) -> dict[int, str]:
    """Processes whose working directory or command line is under ``path``: pid -> command line."""
    root = str(path)
    found: dict[int, str] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(Path(entry.path, "cwd"))
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue  # gone meanwhile, or not ours to look at
        if state != "Z" and (cwd.startswith(root) or root in cmdline):
            found[int(entry.name)] = cmdline.strip()
    return found


def wait_until_gone(path: Path, timeout: float = TIMEOUT) -> dict[int, str]:
    """Wait for every process using ``path`` to end; those still there after ``timeout``."""
    poll(lambda: not processes_using(path), timeout, interval=0.1)
    return processes_using(path)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
