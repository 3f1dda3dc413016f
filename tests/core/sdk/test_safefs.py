"""The dir-fd file primitives: nothing reached through a link, modes set exactly."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from herder.sdk import (
    UnsafePathError,
    give_tree,
    open_beneath,
    open_dir,
    open_file,
    read_file,
    safe_root,
    set_mode,
    write_atomic,
)
from herder.sdk.safefs import REMOVE_DEPTH, make_dir, publish_once, remove_tree


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A root with ``local/conf`` and, beside it, a host directory a link could point at."""
    (tmp_path / "root" / "local" / "conf").mkdir(parents=True)
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "secret").write_text("host data")
    return tmp_path


def test_opens_nested_directory(base: Path) -> None:
    (base / "root" / "local" / "conf" / "a").write_text("x")
    with safe_root(base / "root") as root, open_beneath(root, "local/./conf/") as fd:
        assert os.listdir(fd) == ["a"]


def test_empty_path_reopens_the_root(base: Path) -> None:
    with safe_root(base / "root") as root, open_beneath(root, "") as fd:
        assert os.listdir(fd) == ["local"]


@pytest.mark.parametrize("relative", ["../host", "local/../../host", "/etc"])
def test_leaving_the_root_is_refused(base: Path, relative: str) -> None:
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError) as err:
        open_dir(root, relative)
    assert relative in str(err.value)


def test_link_at_any_component_is_refused_and_named(base: Path) -> None:
    (base / "root" / "local" / "conf").rmdir()
    (base / "root" / "local" / "conf").symlink_to(base / "host")
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError) as err:
        open_dir(root, "local/conf/deeper", create=0o755)
    assert err.value.path == "local/conf"
    assert str(err.value) == "local/conf: a link; not followed"
    assert sorted(os.listdir(base / "host")) == ["secret"]


def test_link_to_a_directory_inside_is_refused_too(base: Path) -> None:
    (base / "root" / "alias").symlink_to("local")
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError, match="alias: a link"):
        open_dir(root, "alias/conf")


def test_file_where_a_directory_is_needed(base: Path) -> None:
    (base / "root" / "local" / "file").write_text("")
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError, match="local/file: not a directory"):
        open_dir(root, "local/file/x")


def test_missing_directory_without_create(base: Path) -> None:
    with safe_root(base / "root") as root, pytest.raises(FileNotFoundError):
        open_dir(root, "local/missing")


def test_create_sets_exact_mode_and_owner_on_new_directories_only(base: Path) -> None:
    os.chmod(base / "root" / "local", 0o750)
    old = os.umask(0o077)
    try:
        with safe_root(base / "root") as root, open_beneath(root, "local/a/b", create=0o1777,
                                                            owner=(65534, 65534)):
            pass
    finally:
        os.umask(old)
    for name in ("local/a", "local/a/b"):
        st = (base / "root" / name).stat()
        assert stat.S_IMODE(st.st_mode) == 0o1777, name
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (65534, 65534)
    assert stat.S_IMODE((base / "root" / "local").stat().st_mode) == 0o750


def test_root_that_is_a_link_is_refused(base: Path) -> None:
    (base / "alias").symlink_to(base / "root")
    with pytest.raises(UnsafePathError, match="a link"), safe_root(base / "alias"):
        pass


def test_write_atomic_replaces_content_with_mode(base: Path) -> None:
    target = base / "root" / "local" / "conf" / "app.conf"
    target.write_text("old")
    with safe_root(base / "root") as root, open_beneath(root, "local/conf") as fd:
        write_atomic(fd, "app.conf", b"new", mode=0o640)
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert os.listdir(target.parent) == ["app.conf"]


def test_write_atomic_replaces_a_planted_link_instead_of_following_it(base: Path) -> None:
    target = base / "root" / "local" / "conf" / "app.conf"
    target.symlink_to(base / "host" / "secret")
    with safe_root(base / "root") as root, open_beneath(root, "local/conf") as fd:
        write_atomic(fd, "app.conf", b"rendered")
    assert (base / "host" / "secret").read_text() == "host data"
    assert not target.is_symlink()
    assert target.read_text() == "rendered"


def test_publish_once_keeps_the_first_file_and_follows_no_link(base: Path) -> None:
    conf = base / "root" / "local" / "conf"
    (conf / "planted").symlink_to(base / "host" / "secret")
    with safe_root(base / "root") as root, open_beneath(root, "local/conf") as fd:
        assert publish_once(fd, "key", b"first", mode=0o600)
        assert not publish_once(fd, "key", b"second")
        assert not publish_once(fd, "planted", b"through the link")
    assert (conf / "key").read_bytes() == b"first"
    assert stat.S_IMODE((conf / "key").stat().st_mode) == 0o600
    assert (base / "host" / "secret").read_text() == "host data"
    assert sorted(os.listdir(conf)) == ["key", "planted"]  # no temporary file left


def test_write_atomic_over_a_directory_is_refused_and_leaves_no_temp(base: Path) -> None:
    (base / "root" / "local" / "conf" / "app.conf").mkdir()
    with (safe_root(base / "root") as root, open_beneath(root, "local/conf") as fd,
          pytest.raises(UnsafePathError, match=r"app\.conf: a directory")):
        write_atomic(fd, "app.conf", b"x")
    assert os.listdir(base / "root" / "local" / "conf") == ["app.conf"]


def test_write_atomic_sets_owner(base: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    with safe_root(base / "root") as root:
        write_atomic(root, "owned", b"x", mode=0o600, owner=(65534, 65534))
    st = (base / "root" / "owned").stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (65534, 65534, 0o600)


def test_give_tree_changes_links_and_no_file_with_another_name(base: Path) -> None:
    """A link in the tree is given, not what it points at; a hard link to a host file is left alone."""
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    local = base / "root" / "local"
    (local / "conf" / "app.conf").write_text("x")
    (local / "to-host").symlink_to(base / "host" / "secret")
    os.link(base / "host" / "secret", local / "hard")
    give_tree(local, (65534, 65534))
    for path in (local, local / "conf", local / "conf" / "app.conf", local / "to-host"):
        assert (path.lstat().st_uid, path.lstat().st_gid) == (65534, 65534), path
    assert (base / "host" / "secret").stat().st_uid == 0


@pytest.mark.parametrize("name", ["a/b", "..", ""])
def test_file_names_are_single_components(base: Path, name: str) -> None:
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError):
        write_atomic(root, name, b"x")


def test_read_file_follows_no_link(base: Path) -> None:
    (base / "root" / "local" / "conf" / "in.tpl").write_text("{{ . }}")
    (base / "root" / "local" / "leak").symlink_to(base / "host" / "secret")
    with safe_root(base / "root") as root:
        assert read_file(root, "local/conf/in.tpl", limit=64) == b"{{ . }}"
        with pytest.raises(UnsafePathError) as err:
            read_file(root, "local/leak", limit=64)
    assert str(err.value) == "local/leak: a link; not followed"


def test_read_file_refuses_a_fifo_without_blocking(base: Path) -> None:
    os.mkfifo(base / "root" / "local" / "pipe")
    result: list[BaseException] = []

    def read() -> None:
        with safe_root(base / "root") as root:
            try:
                read_file(root, "local/pipe", limit=64)
            except UnsafePathError as err:
                result.append(err)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(30)
    assert [str(e) for e in result] == ["local/pipe: not a regular file; not followed"]


def test_read_file_limit(base: Path) -> None:
    (base / "root" / "big").write_bytes(b"x" * 11)
    with safe_root(base / "root") as root:
        assert read_file(root, "big", limit=11) == b"x" * 11
        with pytest.raises(ValueError, match="big: larger than the limit of 10 bytes"):
            read_file(root, "big", limit=10)


def test_open_file_creates_without_following(base: Path) -> None:
    (base / "root" / "out").symlink_to(base / "host" / "new")
    with safe_root(base / "root") as root:
        with pytest.raises(UnsafePathError, match="out: a link"):
            open_file(root, "out", os.O_WRONLY | os.O_CREAT)
        fd = open_file(root, "fresh", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            set_mode(fd, 0o644)
            os.write(fd, b"ok")
        finally:
            os.close(fd)
    assert not (base / "host" / "new").exists()
    assert (base / "root" / "fresh").read_text() == "ok"
    assert stat.S_IMODE((base / "root" / "fresh").stat().st_mode) == 0o644


def test_make_dir_gives_new_and_existing_directories_exactly_mode_and_owner(base: Path) -> None:
    os.chmod(base / "root" / "local", 0o777)  # as a task could have left it
    old = os.umask(0o077)
    try:
        with safe_root(base / "root") as root:
            for name, mode in (("local", 0o755), ("tmp", 0o1777)):
                os.close(make_dir(root, name, mode, owner=(65534, 65534)))
    finally:
        os.umask(old)
    for name, mode in (("local", 0o755), ("tmp", 0o1777)):
        st = (base / "root" / name).stat()
        assert stat.S_IMODE(st.st_mode) == mode, name
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (65534, 65534), name


def test_make_dir_leaves_a_directory_that_is_as_asked_untouched(base: Path) -> None:
    # Each chmod is a journalled write of the inode, and every task's placement makes these directories.
    os.chmod(base / "root" / "local", 0o755)
    before = (base / "root" / "local").stat().st_ctime_ns
    with safe_root(base / "root") as root:
        os.close(make_dir(root, "local", 0o755))
    assert (base / "root" / "local").stat().st_ctime_ns == before


@pytest.mark.parametrize("name", ["", ".", "..", "a/b"])
def test_make_dir_takes_one_component(base: Path, name: str) -> None:
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError, match="single path component"):
        make_dir(root, name, 0o755)


def test_make_dir_refuses_a_link(base: Path) -> None:
    (base / "root" / "planted").symlink_to(base / "host")
    before = (base / "host").stat()
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError, match="a link"):
        make_dir(root, "planted", 0o1777)
    after = (base / "host").stat()
    assert (after.st_mode, after.st_ctime_ns) == (before.st_mode, before.st_ctime_ns)
    assert (base / "host" / "secret").read_text() == "host data"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_remove_tree_removes_links_and_never_what_they_point_at(base: Path) -> None:
    local = base / "root" / "local"
    (local / "conf" / "file").write_text("task data")
    (local / "to-dir").symlink_to(base / "host")
    (local / "conf" / "to-file").symlink_to(base / "host" / "secret")
    (local / "dangling").symlink_to(base / "nowhere")
    os.mkfifo(base / "host" / "fifo")
    (local / "to-fifo").symlink_to(base / "host" / "fifo")  # opening it would block
    with safe_root(base / "root") as root:
        remove_tree(root, "local")
        remove_tree(root, "local")  # gone already: nothing to do
        assert os.listdir(root) == []
    assert sorted(os.listdir(base / "host")) == ["fifo", "secret"]
    assert (base / "host" / "secret").read_text() == "host data"


def test_remove_tree_removes_a_tree_deeper_than_it_holds_descriptors_for(base: Path) -> None:
    depth = 3 * REMOVE_DEPTH + 5
    with safe_root(base / "root") as root:
        fd = os.open("local", os.O_RDONLY, dir_fd=root)
        for _ in range(depth):  # deeper than a path can name
            os.mkdir("d", dir_fd=fd)
            os.symlink(str(base / "host"), "link", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(fd)
        before = open_fds()
        remove_tree(root, "local")
        assert open_fds() == before
        assert os.listdir(root) == []
    assert os.listdir(base / "host") == ["secret"]


def test_remove_tree_refuses_a_directory_swapped_for_a_link_meanwhile(base: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    conf = base / "root" / "local" / "conf"
    (conf / "file").write_text("task data")
    lstat = os.lstat

    def lstat_then_swap(path: str, *, dir_fd: int | None = None) -> os.stat_result:
        """Once ``conf`` is seen to be a directory, and before it is opened, a task swaps it for a link."""
        found = lstat(path, dir_fd=dir_fd)
        if path == "conf" and not conf.is_symlink():
            conf.rename(base / "root" / "moved")
            conf.symlink_to(base / "host")
        return found

    monkeypatch.setattr(os, "lstat", lstat_then_swap)
    with safe_root(base / "root") as root, pytest.raises(UnsafePathError, match="conf: a link; not followed"):
        remove_tree(root, "local")
    monkeypatch.undo()
    assert os.listdir(base / "host") == ["secret"]
    assert (base / "root" / "moved" / "file").read_text() == "task data"
