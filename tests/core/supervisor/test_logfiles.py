"""The rotating log files, in a directory the task can write: nothing planted there is ever followed."""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from herder.supervisor import ProcInfo, Supervisor
from herder.supervisor.logfiles import RotatingFile, log_files
from herder.supervisor.pump import LogPump
from tests.core.supervisor.helpers import WRITER, python, writer_output

MIB = 1024 * 1024


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A file of the host that a planted link points at: it must never be created nor written."""
    return tmp_path / "host" / "target"


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    path = tmp_path / "logs"
    path.mkdir()
    (tmp_path / "host").mkdir()
    return path


def fill(file: RotatingFile) -> None:
    file.write(memoryview(b"x" * file.room))


def test_a_link_at_the_next_name_is_removed_not_followed(logs: Path, target: Path) -> None:
    heard: list[str] = []
    file = RotatingFile(logs, "web", "stdout", max_files=5, max_file_size=1, on_unsafe=heard.append)
    (logs / "web.stdout.1").symlink_to(target)
    fill(file)
    file.rotate()
    file.write(memoryview(b"after\n"))
    file.close()
    assert not target.exists()
    assert [path.name for path in log_files(logs, "web", "stdout")] == ["web.stdout.0", "web.stdout.2"]
    assert (logs / "web.stdout.2").read_bytes() == b"after\n"
    assert not (logs / "web.stdout.1").is_symlink()
    assert heard == [f"{logs / 'web.stdout.1'} was a symbolic link, not a log file: removed it without "
                     "following it; output goes on in web.stdout.2"]


def test_a_link_at_the_first_name_is_not_followed_either(logs: Path, target: Path) -> None:
    target.write_bytes(b"host\n")
    (logs / "web.stderr.0").symlink_to(target)
    heard: list[str] = []
    file = RotatingFile(logs, "web", "stderr", max_files=5, max_file_size=1, on_unsafe=heard.append)
    file.write(memoryview(b"out\n"))
    file.close()
    assert target.read_bytes() == b"host\n"
    assert (logs / "web.stderr.1").read_bytes() == b"out\n" and len(heard) == 1


@pytest.mark.parametrize("kind", ["FIFO", "hard link", "directory"])
def test_what_is_not_a_file_of_its_own_is_skipped(logs: Path, target: Path, kind: str) -> None:
    name = logs / "web.stdout.0"
    if kind == "FIFO":
        os.mkfifo(name)  # opening it for writing would block until someone reads it
    elif kind == "hard link":
        target.write_bytes(b"host\n")
        name.hardlink_to(target)
    else:
        name.mkdir()
        (name / "inside").write_text("")
    heard: list[str] = []
    file = RotatingFile(logs, "web", "stdout", max_files=5, max_file_size=1, on_unsafe=heard.append)
    file.write(memoryview(b"out\n"))
    file.close()
    assert (logs / "web.stdout.1").read_bytes() == b"out\n"
    assert not target.exists() or target.read_bytes() == b"host\n"
    assert len(heard) == 1 and f"was a {kind}" in heard[0]
    if kind == "directory":
        assert "left it there" in heard[0] and name.is_dir()
    else:
        assert not name.exists()


def test_a_link_for_the_log_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "host").mkdir()
    (tmp_path / "logs").symlink_to(tmp_path / "host")
    heard: list[str] = []
    with pytest.raises(NotADirectoryError, match="a link is never followed"):
        RotatingFile(tmp_path / "logs", "web", "stdout", max_files=5, max_file_size=1, on_unsafe=heard.append)
    assert list((tmp_path / "host").iterdir()) == []
    assert heard == [f"{tmp_path / 'logs'} is not a directory (a link, say): never followed; web's stdout is not kept"]


def test_a_log_directory_swapped_for_a_link_is_not_followed(logs: Path, tmp_path: Path) -> None:
    file = RotatingFile(logs, "web", "stdout", max_files=2, max_file_size=1)
    logs.rename(tmp_path / "moved")
    logs.symlink_to(tmp_path / "host")
    for _ in range(3):  # rotations make files and remove old ones: all in the directory first opened
        fill(file)
        file.rotate()
    file.close()
    assert list((tmp_path / "host").iterdir()) == []
    assert sorted(path.name for path in (tmp_path / "moved").iterdir()) == ["web.stdout.2", "web.stdout.3"]


def test_old_files_are_removed_in_the_directory_not_through_links(logs: Path, target: Path) -> None:
    target.write_bytes(b"host\n")
    file = RotatingFile(logs, "web", "stdout", max_files=1, max_file_size=1)
    (logs / "web.stdout.0").unlink()
    (logs / "web.stdout.0").symlink_to(target)  # an old name, purged at the next rotation
    fill(file)
    file.rotate()
    file.close()
    assert target.read_bytes() == b"host\n"


@pytest.mark.parametrize("splice", [True, False], ids=["splice", "read-write"])
def test_a_pipe_is_taken_in_byte_for_byte_across_rotations(logs: Path, tmp_path: Path, splice: bool) -> None:
    source = tmp_path / "source"
    source.write_bytes(os.urandom(5 * MIB + 777))
    (logs / "web.stdout.0").write_bytes(b"before\n")  # a restarted task: continued after what is there
    file = RotatingFile(logs, "web", "stdout", max_files=10, max_file_size=1)
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    pump = LogPump("stdout", read_end, file, splice=splice)
    buffer = memoryview(bytearray(256 * 1024))
    try:
        with subprocess.Popen(["cat", str(source)], stdout=write_end) as cat:
            os.close(write_end)
            while (moved := pump.pump(buffer)) != 0:
                if moved is None:
                    select.select([read_end], [], [])
        assert cat.returncode == 0
    finally:
        pump.close()
    kept = log_files(logs, "web", "stdout")
    assert [path.name for path in kept] == [f"web.stdout.{index}" for index in range(6)]
    assert all(path.stat().st_size == MIB for path in kept[:-1])
    assert b"".join(path.read_bytes() for path in kept) == b"before\n" + source.read_bytes()
    assert (pump.error, pump.dropped) == (None, 0)
    assert pump.splices is splice  # the path asked for is the one taken: the kernel did not refuse splice


def test_the_supervisor_tells_the_owner_and_goes_on(
    connect: Callable[..., Supervisor], spawn: Callable[..., ProcInfo], logs_dir: Path, target: Path,
    tmp_path: Path,
) -> None:
    for index in range(2, 4):
        (logs_dir / f"web.stdout.{index}").symlink_to(target)
    heard: list[str] = []
    supervisor = connect()
    lines = 40_000  # about 2.5 MiB: three files of 1 MiB
    spawn(supervisor, "t1", python(WRITER, str(lines)), max_file_size=1, on_unsafe_log=heard.append)
    assert supervisor.wait("t1", 60) is not None
    supervisor.forget("t1")
    assert not target.exists()
    kept = log_files(logs_dir, "web", "stdout")
    assert [path.name for path in kept] == ["web.stdout.0", "web.stdout.1", "web.stdout.4"]
    assert b"".join(path.read_bytes() for path in kept) == writer_output(lines)
    assert [message.split(" was ")[0] for message in heard] == [
        str(logs_dir / "web.stdout.2"), str(logs_dir / "web.stdout.3")
    ]
