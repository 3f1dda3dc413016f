"""Process-table checks and small task programs for the supervisor's tests."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

from herder import TaskContext, TaskDir
from herder.supervisor import Supervisor
from herder.supervisor.proctree import CGROUP_ROOT, cgroup_prefix

MARK = "HERDER_SUPERVISOR_TEST"
"""The environment variable that marks every process a test starts, so that the fixtures find leftovers."""

PATH = "/usr/local/bin:/usr/bin:/bin"

# Prints a counter every 10 ms until stopped.
COUNTER = """
import sys, time
i = 0
while True:
    print(i, flush=True)
    i += 1
    time.sleep(0.01)
"""

# Numbered lines of varying length, so rotations fall at arbitrary offsets.
WRITER = """
import sys
out = sys.stdout.buffer
for i in range(int(sys.argv[1])):
    out.write(b"line %07d %s\\n" % (i, b"x" * (i % 97)))
out.flush()
"""


def writer_output(lines: int) -> bytes:
    return b"".join(b"line %07d %s\n" % (i, b"x" * (i % 97)) for i in range(lines))


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def _processes() -> Iterator[tuple[int, list[str], bytes]]:
    """(pid, argv, environ) of every live process (zombies left out)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                if stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as cmdline:
                argv = [arg.decode(errors="replace") for arg in cmdline.read().split(b"\0")[:-1]]
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                env = environ.read()
        except OSError:
            continue
        yield int(entry.name), argv, env


def supervisor_pids(data_dir: Path) -> list[int]:
    """The supervisors of ``data_dir`` that run (``python -m herder.supervisor [OPTIONS] DATA_DIR``)."""
    target = data_dir.resolve()
    return [
        pid for pid, argv, _ in _processes()
        if argv[1:3] == ["-m", "herder.supervisor"] and len(argv) >= 4 and Path(argv[-1]).resolve() == target
    ]


def marked_pids(mark: str) -> list[int]:
    """The processes started with ``HERDER_SUPERVISOR_TEST=mark`` in their environment."""
    needle = f"{MARK}={mark}".encode()
    return [pid for pid, _, env in _processes() if needle in env.split(b"\0") and pid != os.getpid()]


def cgroups_of(data_dir: Path) -> list[Path]:
    """The cgroups of ``data_dir``'s supervisors, in every hierarchy."""
    return sorted(CGROUP_ROOT.glob(f"*/{cgroup_prefix(data_dir)}*")) + sorted(
        CGROUP_ROOT.glob(f"{cgroup_prefix(data_dir)}*"))


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def make_ctx(tmp_path: Path, supervisor: Supervisor | None) -> TaskContext:
    """The context of task ``web`` of allocation ``alloc1``, with its directories in ``tmp_path``."""
    task_dir = tmp_path / "alloc1" / "web"
    logs_dir = tmp_path / "alloc1" / "alloc" / "logs"
    for path in (task_dir, logs_dir):
        path.mkdir(parents=True, exist_ok=True)
    return TaskContext(
        alloc_id="alloc1", alloc_name="job.group[0]", alloc_index=0, job_name="job", group_name="group",
        task_name="web", env={}, ports=[], stdout=io.BytesIO(), stderr=io.BytesIO(), supervisor=supervisor,
        task_dir=TaskDir(dir=task_dir, local_dir=task_dir / "local", secrets_dir=task_dir / "secrets",
                         tmp_dir=task_dir / "tmp", alloc_dir=logs_dir.parent, logs_dir=logs_dir),
    )
