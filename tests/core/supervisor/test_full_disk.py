"""A task's log directory on a full disk: the task is never blocked, what cannot be written is counted and
reported, and writing goes on once there is room again."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from herder import ExitResult, TaskEvent, events
from herder.drivers.raw_exec import RawExecDriver
from herder.model import LogConfig, Task
from herder.supervisor import Supervisor
from herder.supervisor.logfiles import log_files
from tests.core.supervisor.helpers import make_ctx
from tests.support.disk import needs_mount, small_disk
from tests.support.waiting import wait_for

MIB = 1024 * 1024
FLOOD = 8 * MIB
"""What the task writes at once: more than the 3 MiB disk holds, and than a pipe holds (1 MiB)."""

# Writes FLOOD bytes, says so, and once told to, a last line.
FLOOD_THEN_LAST_LINE = """
import os, sys, time
out = sys.stdout.buffer
out.write(b"x" * int(sys.argv[1]))
out.flush()
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.01)
out.write(b"last\\n")
out.flush()
"""


def dropped(seen: list[TaskEvent]) -> list[TaskEvent]:
    return [event for event in list(seen) if event.type == events.LOGS_DROPPED]


@needs_mount
def test_a_task_logging_more_than_the_disk_holds_runs_on_and_is_told(
        connect: Callable[..., Supervisor], tmp_path: Path, task_env: dict[str, str]) -> None:
    seen: list[TaskEvent] = []
    ctx = make_ctx(tmp_path, connect())
    ctx.env, ctx.emitter = dict(task_env), seen.append
    wrote, go_on = tmp_path / "wrote", tmp_path / "go-on"
    task = Task(name="web", driver="raw_exec", logs=LogConfig(max_files=10, max_file_size=1), config={
        "command": sys.executable, "args": ["-c", FLOOD_THEN_LAST_LINE, str(FLOOD), str(wrote), str(go_on)],
    })
    logs_dir = ctx.task_dir.logs_dir
    with small_disk(logs_dir, "3m"):
        handle = RawExecDriver({}).herder_task_start(task=task, ctx=ctx)
        try:
            # All 8 MiB written: the supervisor kept taking them from the pipe with the disk full.
            wait_for(wrote.exists, 60, "the task to write more than the disk holds")
            began = wait_for(lambda: dropped(seen), 60, "a Logs Dropped event")[0]
            assert began.message == ("stdout: cannot write the log file (No space left on device): output is "
                                     "dropped until it can be written")
            assert began.details == {"stream": "stdout"}
            # Room again: the two full files (closed, rotated away from) go.
            freed = 0
            for path in log_files(logs_dir, "web", "stdout")[:2]:
                freed += path.stat().st_size
                path.unlink()
            go_on.touch()
            result = handle.wait(60)
        finally:
            handle.kill(5)
        kept = log_files(logs_dir, "web", "stdout")
        kept_bytes = freed + sum(path.stat().st_size for path in kept)
        assert kept[-1].read_bytes().endswith(b"last\n")  # written again once there was room
    assert result == ExitResult(exit_code=0)
    counts = [event for event in dropped(seen) if "bytes" in event.details]
    assert [event.details["stream"] for event in counts] == ["stdout"]
    assert counts[0].message.startswith("stdout: ") and counts[0].message.endswith(
        " bytes of output dropped (No space left on device); writing again")
    # Every byte the task wrote is either in the files or counted as dropped.
    assert kept_bytes + counts[0].details["bytes"] == FLOOD + len(b"last\n")
    assert 0 < counts[0].details["bytes"] < FLOOD
