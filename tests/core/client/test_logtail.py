"""LogTail.seek and size: offsets across the rotated files still kept."""

from __future__ import annotations

import os
from pathlib import Path

from herder.client.logtail import LogTail


def test_seek_counts_across_the_kept_files_oldest_first(tmp_path: Path) -> None:
    (tmp_path / "t.stdout.3").write_bytes(b"0123456789")  # the older files were rotated away
    (tmp_path / "t.stdout.4").write_bytes(b"abcde")
    tail = LogTail(tmp_path, "t", "stdout")
    assert tail.size() == 15
    assert tail.seek(12) == 12
    assert tail.read() == b"cde"
    assert tail.seek(8) == 8
    assert tail.read() == b"89abcde"

    assert tail.seek(100) == 15  # past the end: the end, where new output will come
    assert tail.read() == b""
    with (tmp_path / "t.stdout.4").open("ab") as f:
        f.write(b"f")
    (tmp_path / "t.stdout.5").write_bytes(b"gh")
    assert tail.read() == b"fgh"


def test_seek_without_files(tmp_path: Path) -> None:
    tail = LogTail(tmp_path, "t", "stderr")
    assert tail.size() == 0 and tail.seek(5) == 0
    (tmp_path / "t.stderr.0").write_bytes(b"first")
    assert tail.read() == b"first"


def test_a_link_among_the_log_files_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"the host's secret")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "t.stdout.0").write_bytes(b"mine\n")
    (logs / "t.stdout.1").symlink_to(secret)
    (logs / "t.stdout.2").hardlink_to(secret)  # a file with another name elsewhere: not read either
    os.mkfifo(logs / "t.stdout.3")  # opening it would block
    tail = LogTail(logs, "t", "stdout")
    assert tail.read() == b"mine\n"
    assert tail.size() == 5 and tail.seek(100) == 5


def test_a_link_for_the_log_directory_is_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "t.stdout.0").write_bytes(b"not the task's")
    (tmp_path / "logs").symlink_to(elsewhere)
    tail = LogTail(tmp_path / "logs", "t", "stdout")
    assert tail.read() == b"" and tail.size() == 0
