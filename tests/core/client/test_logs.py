"""Task log capture: rotation, continuation, the write path and closing."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from herder.client.logs import LogSink, TaskLogs
from herder.model import LogConfig
from herder.supervisor.logfiles import log_files
from herder.supervisor.pump import Dropped
from tests.support.disk import needs_mount, small_disk
from tests.support.waiting import TIMEOUT, wait_for

MIB = 1024 * 1024

# Numbered lines of varying length, so rotations fall at arbitrary offsets.
WRITER = """
import sys
out = sys.stdout.buffer
for i in range(int(sys.argv[1])):
    out.write(b"line %07d %s\\n" % (i, b"x" * (i % 97)))
out.flush()
"""


def expected_output(lines: int) -> bytes:
    return b"".join(b"line %07d %s\n" % (i, b"x" * (i % 97)) for i in range(lines))


def kept_bytes(logs_dir: Path, task: str = "web", stream: str = "stdout") -> bytes:
    return b"".join(path.read_bytes() for path in log_files(logs_dir, task, stream))


def assert_rotated(logs_dir: Path, config: LogConfig, output: bytes) -> None:
    """The kept files are the exact tail of ``output``, rotated byte-exactly."""
    files = log_files(logs_dir, "web", "stdout")
    max_bytes = config.max_file_size * MIB
    indexes = [int(path.name.rsplit(".", 1)[1]) for path in files]
    assert len(files) == config.max_files
    assert indexes == list(range(indexes[0], indexes[0] + len(files)))
    assert all(path.stat().st_size == max_bytes for path in files[:-1])
    assert 0 < files[-1].stat().st_size <= max_bytes
    kept = kept_bytes(logs_dir)
    assert output.endswith(kept)
    # Every byte since the oldest kept file began is there, in order.
    assert len(output) - len(kept) == indexes[0] * max_bytes


def test_child_output_rotates_and_keeps_the_tail(tmp_path: Path) -> None:
    config = LogConfig(max_files=3, max_file_size=1)
    lines = 110_000  # about 6.9 MiB: six rotations
    with LogSink(tmp_path, "web", "stdout", config) as sink:
        subprocess.run([sys.executable, "-c", WRITER, str(lines)], stdout=sink, check=True)
    assert_rotated(tmp_path, config, expected_output(lines))
    assert log_files(tmp_path, "web", "stdout")[-1].name == "web.stdout.6"


def test_sink_outlives_restarts_of_the_task(tmp_path: Path) -> None:
    config = LogConfig(max_files=10, max_file_size=1)
    with LogSink(tmp_path, "web", "stdout", config) as sink:
        for run in range(3):
            subprocess.run(
                [sys.executable, "-c", f"print('run {run}')"], stdout=sink, check=True
            )
    assert kept_bytes(tmp_path) == b"run 0\nrun 1\nrun 2\n"


def test_write_path_rotates_byte_exactly(tmp_path: Path) -> None:
    config = LogConfig(max_files=4, max_file_size=1)
    chunks = [bytes([65 + i % 26]) * (1000 + i * 37 % 5000) for i in range(2000)]
    with LogSink(tmp_path, "web", "stdout", config) as sink:
        for chunk in chunks:
            assert sink.write(chunk) == len(chunk)
        sink.write(memoryview(b"end\n"))
        sink.flush()
    assert_rotated(tmp_path, config, b"".join(chunks) + b"end\n")


def test_reopening_continues_the_newest_file(tmp_path: Path) -> None:
    config = LogConfig(max_files=3, max_file_size=1)
    for text in (b"first\n", b"second\n"):
        with LogSink(tmp_path, "web", "stdout", config) as sink:
            sink.write(text)
    assert [p.name for p in log_files(tmp_path, "web", "stdout")] == ["web.stdout.0"]
    assert kept_bytes(tmp_path) == b"first\nsecond\n"


def test_reopening_after_a_full_file_starts_the_next(tmp_path: Path) -> None:
    (tmp_path / "web.stdout.0").write_bytes(b"a" * 10)
    (tmp_path / "web.stdout.1").write_bytes(b"b" * MIB)
    with LogSink(tmp_path, "web", "stdout", LogConfig(max_files=2, max_file_size=1)) as sink:
        sink.write(b"new\n")
    files = log_files(tmp_path, "web", "stdout")
    assert [p.name for p in files] == ["web.stdout.1", "web.stdout.2"]
    assert files[-1].read_bytes() == b"new\n"


def test_reopening_with_fewer_max_files_drops_the_oldest(tmp_path: Path) -> None:
    for index in range(5):
        (tmp_path / f"web.stdout.{index}").write_bytes(b"old\n")
    with LogSink(tmp_path, "web", "stdout", LogConfig(max_files=2, max_file_size=1)) as sink:
        sink.write(b"new\n")
    assert [p.name for p in log_files(tmp_path, "web", "stdout")] == [
        "web.stdout.3",
        "web.stdout.4",
    ]


def test_a_sink_never_written_to_touches_no_file(tmp_path: Path) -> None:
    """Tasks whose processes log through the supervisor never use their sink: it costs nothing."""
    threads_before = threading.active_count()
    with LogSink(tmp_path, "web", "stdout", LogConfig()):
        assert threading.active_count() == threads_before
    assert list(tmp_path.iterdir()) == []


def test_log_files_are_in_index_order_and_per_stream(tmp_path: Path) -> None:
    for name in ("web.stdout.10", "web.stdout.2", "web.stdout.0", "web.stderr.1", "webx.stdout.1"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "web.stdout.x").write_bytes(b"")
    assert [p.name for p in log_files(tmp_path, "web", "stdout")] == [
        "web.stdout.0",
        "web.stdout.2",
        "web.stdout.10",
    ]
    assert log_files(tmp_path / "missing", "web", "stdout") == []


def test_task_logs_capture_both_streams(tmp_path: Path) -> None:
    script = "import sys; print('out'); print('err', file=sys.stderr)"
    with TaskLogs.open(tmp_path, "web", LogConfig()) as logs:
        subprocess.run(
            [sys.executable, "-c", script], stdout=logs.stdout, stderr=logs.stderr, check=True
        )
    assert kept_bytes(tmp_path, stream="stdout") == b"out\n"
    assert kept_bytes(tmp_path, stream="stderr") == b"err\n"
    assert logs.stdout.closed and logs.stderr.closed


def test_close_with_an_orphan_holding_the_pipe_is_bounded(tmp_path: Path) -> None:
    script = (
        "import subprocess; "
        "child = subprocess.Popen(['sleep', '60']); "
        "print(child.pid, flush=True)"
    )
    sink = LogSink(tmp_path, "web", "stdout")
    subprocess.run([sys.executable, "-c", script], stdout=sink, check=True)
    wait_for(lambda: kept_bytes(tmp_path).endswith(b"\n"), what="the orphan's pid in the log")
    orphan = int(kept_bytes(tmp_path))
    try:
        started = time.monotonic()
        sink.close(timeout=0.5)
        assert time.monotonic() - started < TIMEOUT  # not the orphan's 60 s
        assert sink.closed
    finally:
        os.kill(orphan, signal.SIGKILL)


def test_closed_sink_refuses_writes(tmp_path: Path) -> None:
    sink = LogSink(tmp_path, "web", "stdout")
    sink.close()
    sink.close()
    with pytest.raises(ValueError):
        sink.write(b"late")
    with pytest.raises(ValueError):
        sink.fileno()


def test_failing_disk_drops_output_instead_of_blocking(tmp_path: Path) -> None:
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    with LogSink(logs_dir, "web", "stdout", LogConfig(max_files=2, max_file_size=1)) as sink:
        sink.write(b"a" * MIB)
        # The first file is filled before the directory goes, or the two race.
        wait_for(lambda: len(kept_bytes(logs_dir)) == MIB, what="the first file filled")
        shutil.rmtree(logs_dir)
        sink.write(b"b" * 3 * MIB)  # more than the pipe holds: only returns if drained
        logs_dir.mkdir()
        sink.write(b"back\n")
    assert kept_bytes(logs_dir).endswith(b"back\n")


@needs_mount
def test_a_full_disk_never_blocks_the_writer_and_what_is_dropped_is_counted(tmp_path: Path) -> None:
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    heard: list[Dropped] = []
    with small_disk(logs_dir, "3m"):
        with LogSink(logs_dir, "web", "stdout", LogConfig(max_files=10, max_file_size=1),
                     on_dropped=heard.append) as sink:
            sink.write(b"x" * 8 * MIB)  # more than the disk and the pipe hold: only returns if drained
        kept = sum(path.stat().st_size for path in log_files(logs_dir, "web", "stdout"))
    assert [(report.stream, report.bytes) for report in heard] == [("stdout", None), ("stdout", 8 * MIB - kept)]
    assert heard[-1].message == (f"stdout: {8 * MIB - kept} bytes of output dropped (No space left on device); "
                                 "the output ended")
    assert 2 * MIB < kept < 8 * MIB


@needs_mount
def test_a_listener_that_fails_does_not_stop_the_capture(tmp_path: Path) -> None:
    def refuse(dropped: Dropped) -> None:
        raise OSError(errno.ENOSPC, "no room for the event either")

    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    config = LogConfig(max_files=10, max_file_size=1)
    written: list[int] = []
    with small_disk(logs_dir, "3m"), LogSink(logs_dir, "web", "stdout", config, on_dropped=refuse) as sink:
        # Had capture stopped, the write would block until the sink's pipe is closed, then fail.
        writer = threading.Thread(target=lambda: written.append(sink.write(b"x" * 8 * MIB)), daemon=True)
        writer.start()
        writer.join(60)  # generous: the guarantee is that the pump never stops taking from the pipe
        assert written == [8 * MIB]


def test_invalid_stream_or_limits_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="stream"):
        LogSink(tmp_path, "web", "stdin")
    with pytest.raises(ValueError, match="max_files"):
        LogSink(tmp_path, "web", "stdout", LogConfig(max_files=0))


def test_a_planted_link_is_removed_and_reported(tmp_path: Path) -> None:
    target = tmp_path / "target"
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    (logs_dir / "web.stdout.1").symlink_to(target)
    heard: list[str] = []
    with LogSink(logs_dir, "web", "stdout", LogConfig(max_files=5, max_file_size=1), on_unsafe=heard.append) as sink:
        sink.write(b"a" * (MIB + 1))
    assert not target.exists()
    assert kept_bytes(logs_dir) == b"a" * (MIB + 1)
    assert [path.name for path in log_files(logs_dir, "web", "stdout")] == ["web.stdout.0", "web.stdout.2"]
    assert len(heard) == 1 and "web.stdout.1 was a symbolic link" in heard[0]
