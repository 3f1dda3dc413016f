"""Allocation and task directories, and job-file paths inside them."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from herder.client.taskdir import build_alloc_dir, build_task_dir, make_data_dir, mounts_beneath, remove_alloc_dir
from herder.context import TaskDir
from herder.sdk import UnsafePathError, locate_in_task_dir, resolve_in_task_dir


@pytest.fixture
def task_dir(tmp_path: Path) -> TaskDir:
    return build_task_dir(build_alloc_dir(tmp_path, "abc123"), "web")


def test_alloc_dir_layout(tmp_path: Path) -> None:
    root = build_alloc_dir(tmp_path, "abc123")
    assert root == tmp_path / "allocs" / "abc123"
    for name in ("data", "logs", "tmp"):
        assert (root / "alloc" / name).is_dir()
    assert build_alloc_dir(tmp_path, "abc123") == root


def test_task_dir_layout_and_modes(tmp_path: Path) -> None:
    root = build_alloc_dir(tmp_path, "abc123")
    old_umask = os.umask(0)
    try:
        task_dir = build_task_dir(root, "web")
    finally:
        os.umask(old_umask)
    assert task_dir == TaskDir(
        dir=root / "web",
        local_dir=root / "web" / "local",
        secrets_dir=root / "web" / "secrets",
        tmp_dir=root / "web" / "tmp",
        alloc_dir=root / "alloc",
        logs_dir=root / "alloc" / "logs",
    )
    for path in (task_dir.local_dir, task_dir.secrets_dir, task_dir.tmp_dir):
        assert path.is_dir()
    assert stat.S_IMODE(task_dir.secrets_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(task_dir.tmp_dir.stat().st_mode) == 0o1777
    for name in ("data", "tmp"):  # every task of the group writes them, whatever its user
        assert stat.S_IMODE((root / "alloc" / name).stat().st_mode) == 0o1777
    assert stat.S_IMODE((root / "alloc" / "logs").stat().st_mode) == 0o755
    assert stat.S_IMODE(root.parent.stat().st_mode) == 0o711
    assert stat.S_IMODE(root.stat().st_mode) == 0o700  # 0711 only for an allocation whose process needs it
    task_dir.secrets_dir.chmod(0o755)
    build_task_dir(root, "web")
    assert stat.S_IMODE(task_dir.secrets_dir.stat().st_mode) == 0o700


def test_task_dirs_belong_to_the_task_user(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving directories away needs root")
    task_dir = build_task_dir(build_alloc_dir(tmp_path, "abc123"), "web", owner=(65534, 65534))
    for path in (task_dir.local_dir, task_dir.secrets_dir, task_dir.tmp_dir):
        assert (path.stat().st_uid, path.stat().st_gid) == (65534, 65534), path
    assert task_dir.dir.stat().st_uid == 0


@pytest.mark.parametrize("planted", ["web/secrets", "web/local", "alloc/tmp", "alloc/data"])
def test_a_planted_link_is_refused_not_followed(tmp_path: Path, planted: str) -> None:
    root = build_alloc_dir(tmp_path, "abc123")
    build_task_dir(root, "web")
    host = tmp_path / "host"
    host.mkdir(mode=0o755)
    os.chmod(host, 0o755)
    (root / planted).rmdir()
    (root / planted).symlink_to(host)
    with pytest.raises(UnsafePathError) as caught:
        build_task_dir(build_alloc_dir(tmp_path, "abc123"), "web")
    assert str(caught.value) == f"{root / planted}: a link; not followed"
    assert stat.S_IMODE(host.stat().st_mode) == 0o755


def test_the_data_dir_is_private(tmp_path: Path) -> None:
    make_data_dir(tmp_path / "a" / "data")
    assert stat.S_IMODE((tmp_path / "a" / "data").stat().st_mode) == 0o700
    (tmp_path / "a" / "data").chmod(0o755)
    make_data_dir(tmp_path / "a" / "data")
    assert stat.S_IMODE((tmp_path / "a" / "data").stat().st_mode) == 0o700
    (tmp_path / "a" / "data").chmod(0o711)  # made traversable for a task: kept
    make_data_dir(tmp_path / "a" / "data")
    assert stat.S_IMODE((tmp_path / "a" / "data").stat().st_mode) == 0o711


@pytest.mark.parametrize("name", ["", ".", "..", "alloc", "a/b"])
def test_task_names_that_cannot_be_directories(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError):
        build_task_dir(build_alloc_dir(tmp_path, "abc123"), name)


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("local/app.conf", "web/local/app.conf"),
        ("local/", "web/local"),
        ("secrets/token", "web/secrets/token"),
        ("", "web"),
        ("alloc/data/x", "alloc/data/x"),
        ("../alloc/data/x", "alloc/data/x"),
        ("local/../../alloc/logs", "alloc/logs"),
    ],
)
def test_paths_inside_resolve(task_dir: TaskDir, relative: str, expected: str) -> None:
    assert resolve_in_task_dir(task_dir, relative) == (task_dir.dir.parent / expected).resolve()


def test_absolute_path_inside_is_accepted(task_dir: TaskDir) -> None:
    inside = task_dir.local_dir / "x"
    assert resolve_in_task_dir(task_dir, str(inside)) == inside.resolve()


@pytest.mark.parametrize(
    "relative",
    ["../../etc/passwd", "/etc/passwd", "..", "../other/local/x", "alloc/../web/../../x"],
)
def test_escapes_are_refused(task_dir: TaskDir, relative: str) -> None:
    with pytest.raises(ValueError, match="escapes"):
        resolve_in_task_dir(task_dir, relative)


def test_symlink_escape_is_refused(task_dir: TaskDir, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (task_dir.local_dir / "link").symlink_to(outside)
    (task_dir.alloc_dir / "data" / "link").symlink_to("/etc")
    with pytest.raises(ValueError, match="escapes"):
        resolve_in_task_dir(task_dir, "local/link/app.conf")
    with pytest.raises(ValueError, match="escapes"):
        resolve_in_task_dir(task_dir, "alloc/data/link/passwd")


def test_symlink_inside_is_followed(task_dir: TaskDir) -> None:
    (task_dir.local_dir / "conf").symlink_to(task_dir.alloc_dir / "data")
    assert resolve_in_task_dir(task_dir, "local/conf/x") == (
        task_dir.alloc_dir / "data" / "x"
    ).resolve()


def test_symlink_loop_is_refused(task_dir: TaskDir) -> None:
    (task_dir.local_dir / "loop").symlink_to(task_dir.local_dir / "loop")
    with pytest.raises(ValueError):
        resolve_in_task_dir(task_dir, "local/loop/x")


@pytest.mark.parametrize(
    ("relative", "root", "rest"),
    [
        ("local/app.conf", "web", "local/app.conf"),
        ("local/", "web", "local"),
        ("", "web", ""),
        ("alloc/data/x", "alloc", "data/x"),
        ("../alloc/data/x", "alloc", "data/x"),
        ("local/../../alloc/logs", "alloc", "logs"),
        ("local/link/../x", "web", "local/x"),
    ],
)
def test_locate_splits_by_text_alone(task_dir: TaskDir, relative: str, root: str, rest: str) -> None:
    assert locate_in_task_dir(task_dir, relative) == (task_dir.dir.parent / root, rest)


def test_locate_absolute_paths_inside(task_dir: TaskDir) -> None:
    assert locate_in_task_dir(task_dir, str(task_dir.local_dir / "x")) == (task_dir.dir, "local/x")
    assert locate_in_task_dir(task_dir, str(task_dir.alloc_dir / "data")) == (task_dir.alloc_dir, "data")


@pytest.mark.parametrize("relative", ["../../etc/passwd", "/etc/passwd", "..", "../other/local/x"])
def test_locate_refuses_escapes(task_dir: TaskDir, relative: str) -> None:
    with pytest.raises(ValueError, match="escapes"):
        locate_in_task_dir(task_dir, relative)


def test_remove_alloc_dir_removes_it_and_only_it(tmp_path: Path) -> None:
    task_dir = build_task_dir(build_alloc_dir(tmp_path, "abc123"), "web")
    build_alloc_dir(tmp_path, "other")
    (task_dir.local_dir / "file").write_text("data")
    (tmp_path / "host").write_text("host data")
    (task_dir.local_dir / "link").symlink_to(tmp_path / "host")
    remove_alloc_dir(tmp_path, "abc123")
    remove_alloc_dir(tmp_path, "abc123")  # gone already: nothing to do
    assert sorted(p.name for p in (tmp_path / "allocs").iterdir()) == ["other"]
    assert (tmp_path / "host").read_text() == "host data"


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting needs root")
def test_an_alloc_dir_with_a_mount_in_it_is_not_removed(tmp_path: Path) -> None:
    task_dir = build_task_dir(build_alloc_dir(tmp_path, "abc123"), "web")
    host = tmp_path / "host"
    host.mkdir()
    (host / "file").write_text("host data")
    subprocess.run(["mount", "--bind", str(host), str(task_dir.local_dir)], check=True)
    try:
        with pytest.raises(UnsafePathError, match="a mount point in an allocation directory"):
            remove_alloc_dir(tmp_path, "abc123")
    finally:
        subprocess.run(["umount", str(task_dir.local_dir)], check=True)
    assert (host / "file").read_text() == "host data"
    assert (task_dir.local_dir).is_dir()


def test_mount_points_are_read_with_their_escapes(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "22 1 8:1 / / rw - ext4 /dev/vda rw\n"
        "90 22 8:1 /x /data/allocs/a\\040b/web/local rw - ext4 /dev/vda rw\n"
        "91 22 0:5 / /data/allocs-old rw - tmpfs tmpfs rw\n")
    assert mounts_beneath(Path("/data/allocs"), mountinfo) == [Path("/data/allocs/a b/web/local")]
