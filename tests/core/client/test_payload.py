"""Writing a dispatched job's payload into a task's ``local/`` directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from herder.client.hooks.payload import PayloadError, write_payload


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    (tmp_path / "task" / "local").mkdir(parents=True)
    return tmp_path / "task"


def test_the_payload_is_written_with_the_directories_on_the_way(task_dir: Path) -> None:
    write_payload(task_dir, "in/deep/data.json", b'{"a": 1}', None)
    written = task_dir / "local" / "in" / "deep" / "data.json"
    assert written.read_bytes() == b'{"a": 1}'
    assert stat.S_IMODE(written.stat().st_mode) == 0o644
    assert stat.S_IMODE(written.parent.stat().st_mode) == 0o755

    write_payload(task_dir, "in/deep/data.json", b"again", None)  # a restarted task gets it again
    assert written.read_bytes() == b"again"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root")
def test_the_file_belongs_to_the_task_user_or_to_the_owner_of_local(task_dir: Path) -> None:
    write_payload(task_dir, "mine", b"x", (65534, 65534))
    assert (os.stat(task_dir / "local" / "mine").st_uid, os.stat(task_dir / "local" / "mine").st_gid) == \
        (65534, 65534)
    os.chown(task_dir / "local", 1234, 1234)  # a driver gave the task its directory
    write_payload(task_dir, "sub/theirs", b"x", None)
    for path in (task_dir / "local" / "sub", task_dir / "local" / "sub" / "theirs"):
        assert (path.stat().st_uid, path.stat().st_gid) == (1234, 1234)


def test_a_link_on_the_way_is_refused_naming_it(task_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (task_dir / "local" / "in").symlink_to(outside)
    with pytest.raises(PayloadError, match=r"dispatch payload local/in/data: local/in: a link; not followed"):
        write_payload(task_dir, "in/data", b"x", None)
    assert list(outside.iterdir()) == []


def test_a_link_in_place_of_local_is_refused(task_dir: Path, tmp_path: Path) -> None:
    (task_dir / "local").rmdir()
    (task_dir / "local").symlink_to(tmp_path)
    with pytest.raises(PayloadError, match="local: a link"):
        write_payload(task_dir, "data", b"x", None)
    assert not (tmp_path / "data").exists()


def test_a_link_at_the_file_is_replaced_not_followed(task_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "host-file"
    target.write_text("HOST")
    (task_dir / "local" / "data").symlink_to(target)
    write_payload(task_dir, "data", b"payload", None)
    assert target.read_text() == "HOST"
    assert not (task_dir / "local" / "data").is_symlink()
    assert (task_dir / "local" / "data").read_bytes() == b"payload"
