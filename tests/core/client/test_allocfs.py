"""An allocation's files as its tasks see them (``herder.client.allocfs``), and their modes as Go writes them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from herder.agent.nomad.routes_alloc import go_file_mode
from herder.client import allocfs
from herder.client.allocfs import AllocFiles, FileRefused


@pytest.fixture
def files(tmp_path: Path) -> AllocFiles:
    alloc = tmp_path / "alloc-id"
    for name in ("alloc/logs", "t/local", "t/secrets", ".herder-artifact-1"):
        (alloc / name).mkdir(parents=True)
    (alloc / "t/local/a.txt").write_text("text\n")
    (alloc / "t/local/b.bin").write_bytes(b"\x00\x01")
    (alloc / "t/secrets/token").write_text("s")
    (alloc / "t/local/link").symlink_to(tmp_path)
    os.mkfifo(alloc / "t/local/fifo")
    (alloc / "t/local/one").write_text("one name, then two\n")
    os.link(alloc / "t/local/one", alloc / "t/local/again")
    return AllocFiles(alloc, ["t"])


def test_the_top_is_the_tasks_view(files: AllocFiles) -> None:
    assert [f.name for f in files.entries("/")] == ["alloc", "t"]
    assert files.stat("/").is_dir and files.stat("/").name == "alloc-id"
    with pytest.raises(FileRefused) as refused:
        files.entries(".herder-artifact-1")
    assert refused.value.missing


def test_names_are_what_lstat_says_and_content_types_are_sniffed(files: AllocFiles) -> None:
    listed = {f.name: f for f in files.entries("t/local")}
    assert stat.S_ISLNK(listed["link"].mode) and stat.S_ISFIFO(listed["fifo"].mode)
    assert files.stat("/t/local/a.txt").content_type == "text/plain; charset=utf-8"
    assert files.stat("t/local/b.bin").content_type == "application/octet-stream"
    assert files.stat("t/secrets/token").content_type == "application/octet-stream"  # not even sniffed
    assert stat.S_ISLNK(files.stat("t/local/link").mode)


def test_only_a_regular_file_of_one_name_outside_secrets_is_opened(files: AllocFiles) -> None:
    with files.open("t/local/a.txt") as (fd, size):
        assert os.pread(fd, 100, 0) == b"text\n" and size == 5
    refusals = {"t/local/link": "a link", "t/local/fifo": "not a regular file", "t/local/again": "a hard link",
                "t/secrets/token": "Reading secret file prohibited", "t/local": "is a directory",
                "t/local/link/x": "a link", "t/../t/local/a.txt": "'..'", "t/local/a.txt/x": "not a directory"}
    for path, reason in refusals.items():
        with pytest.raises(FileRefused, match=reason) as refused, files.open(path):
            pass
        assert not refused.value.missing
    with pytest.raises(FileRefused) as missing, files.open("/etc/passwd"):
        pass
    assert missing.value.missing


@pytest.mark.parametrize(("mode", "text"), [
    (0o100644, "-rw-r--r--"), (0o040755, "drwxr-xr-x"), (0o041777, "dtrwxrwxrwx"), (0o120777, "Lrwxrwxrwx"),
    (0o010644, "prw-r--r--"), (0o020666, "Dcrw-rw-rw-"), (0o060660, "Drw-rw----"), (0o140755, "Srwxr-xr-x"),
    (0o104755, "urwxr-xr-x"), (0o102755, "grwxr-xr-x"),
])
def test_modes_read_as_go_writes_them(mode: int, text: str) -> None:
    assert go_file_mode(mode) == text


def test_a_collected_allocation_has_no_files(tmp_path: Path) -> None:
    gone = AllocFiles(tmp_path / "collected", ["t"])
    for read in (gone.stat, gone.entries):
        with pytest.raises(FileRefused) as refused:
            read("/")
        assert refused.value.missing


def test_a_directory_of_too_many_names_is_not_listed(files: AllocFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocfs, "MAX_ENTRIES", 6)  # t/local has six names
    assert len(files.entries("t/local")) == 6
    monkeypatch.setattr(allocfs, "MAX_ENTRIES", 5)
    with pytest.raises(FileRefused, match="more than 5 entries; not listed"):
        files.entries("t/local")
    monkeypatch.setattr(allocfs, "MAX_ENTRIES", 2)  # the top has three names, two of them the task's
    assert [f.name for f in files.entries("/")] == ["alloc", "t"]
