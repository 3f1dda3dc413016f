"""The artifacts plugin against a real HTTP server, with archives built at test time.

Every traversal trick is served as a real archive and must be refused with
nothing written outside the destination, and nothing in it either.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks.artifacts import ArtifactError, ArtifactsConfig
from herder.errors import ConfigError, RecoverableError
from herder.model import Artifact
from tests.core.client.artifact_support import (
    Context,
    fetch,
    tar_bytes,
    tar_link,
    tar_special,
    tree,
    zip_bytes,
)
from tests.support.fileserver import FileServer, serve

APP = b"#!/bin/sh\necho hello\n"


@pytest.fixture
def server() -> Iterator[FileServer]:
    yield from serve()


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "run")


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- fetching and unpacking ----------------------------------------------------

@pytest.mark.parametrize("suffix,compression", [(".tar", ""), (".tar.gz", "gz"), (".tgz", "gz"),
                                                (".tar.bz2", "bz2"), (".tar.xz", "xz")])
def test_a_tar_archive_is_unpacked_into_the_destination(server: FileServer, context: Context, suffix: str,
                                                         compression: str) -> None:
    server.files[f"/app{suffix}"] = tar_bytes([("bin/app.sh", APP), ("README", b"read me")], compression)
    fetch(context, Artifact(source=server.url(f"/app{suffix}")))
    assert tree(context.task_dir / "local") == {"README": "read me", "bin/app.sh": APP.decode()}
    assert (context.task_dir / "local/bin/app.sh").stat().st_mode & 0o777 == 0o755
    assert context.types()[0] == "Downloading Artifacts"


def test_a_zip_archive_is_unpacked_with_its_links_inside(server: FileServer, context: Context) -> None:
    server.files["/app.zip"] = zip_bytes([("dir/a.txt", b"a")], links=[("dir/b", "a.txt")])
    fetch(context, Artifact(source=server.url("/app.zip"), destination="local/x"))
    assert tree(context.task_dir / "local/x") == {"dir/a.txt": "a", "dir/b": "-> a.txt"}


@pytest.mark.parametrize("suffix,compress", [(".gz", gzip.compress), (".bz2", bz2.compress),
                                             (".xz", lzma.compress)])
def test_a_single_compressed_file_is_decompressed(server: FileServer, context: Context, suffix: str,
                                                  compress: object) -> None:
    server.files[f"/conf.json{suffix}"] = compress(b"{}")  # type: ignore[operator]
    fetch(context, Artifact(source=server.url(f"/conf.json{suffix}")))
    assert tree(context.task_dir / "local") == {"conf.json": "{}"}


def test_a_plain_file_lands_in_the_destination_under_its_name(server: FileServer, context: Context) -> None:
    server.files["/bin/tool"] = APP
    fetch(context, Artifact(source=server.url("/bin/tool"), destination="local/bin"))
    assert tree(context.task_dir / "local") == {"bin/tool": APP.decode()}


def test_archive_false_keeps_the_archive_packed(server: FileServer, context: Context) -> None:
    data = tar_bytes([("a", b"a")], "gz")
    server.files["/app.tgz"] = data
    fetch(context, Artifact(source=server.url("/app.tgz"), options={"archive": "false"}))
    assert (context.task_dir / "local/app.tgz").read_bytes() == data


def test_go_getter_query_options_are_read_from_the_source(server: FileServer, context: Context) -> None:
    data = tar_bytes([("a", b"a")], "gz")
    server.files["/app.tgz"] = data
    fetch(context, Artifact(source=server.url(f"/app.tgz?archive=false&checksum={sha256(data)}")))
    assert (context.task_dir / "local/app.tgz").read_bytes() == data
    assert server.requests[0][0] == "/app.tgz"  # herder's options are not sent to the server


def test_mode_file_writes_the_destination_itself(server: FileServer, context: Context) -> None:
    server.files["/v1/blob"] = b"blob"
    fetch(context, Artifact(source=server.url("/v1/blob"), destination="local/data/blob.bin", mode="file"))
    assert tree(context.task_dir / "local") == {"data/blob.bin": "blob"}


def test_mode_dir_needs_an_archive(server: FileServer, context: Context) -> None:
    server.files["/blob"] = b"blob"
    with pytest.raises(ArtifactError, match="mode dir needs an archive"):
        fetch(context, Artifact(source=server.url("/blob"), mode="dir"))
    assert tree(context.task_dir) == {}


@pytest.mark.parametrize("kind", ["md5", "sha1", "sha256", "sha512"])
def test_every_checksum_type_is_checked(server: FileServer, context: Context, kind: str) -> None:
    server.files["/f"] = b"content"
    checksum = f"{kind}:{hashlib.new(kind, b'content').hexdigest()}"
    fetch(context, Artifact(source=server.url("/f"), options={"checksum": checksum}))
    assert tree(context.task_dir / "local") == {"f": "content"}


def test_a_checksum_mismatch_fails_recoverably_and_leaves_nothing_behind(server: FileServer,
                                                                        context: Context) -> None:
    server.files["/app.tgz"] = tar_bytes([("a", b"a")], "gz")
    with pytest.raises(RecoverableError, match="checksum mismatch"):
        fetch(context, Artifact(source=server.url("/app.tgz"), options={"checksum": sha256(b"other")}))
    assert tree(context.task_dir) == {}
    assert not list(context.root.rglob(".herder-artifact-*"))
    assert context.types() == ["Downloading Artifacts", "Downloading Artifacts", "Failed Artifact Download"]


def test_headers_are_sent(server: FileServer, context: Context) -> None:
    server.files["/private"] = b"secret"
    server.required_headers["X-Token"] = "abc"
    fetch(context, Artifact(source=server.url("/private"), headers={"X-Token": "abc"}))
    assert tree(context.task_dir / "local") == {"private": "secret"}


def test_a_server_error_is_recoverable_and_a_missing_file_named(server: FileServer, context: Context) -> None:
    server.files["/flaky"] = b"x"
    server.failures["/flaky"] = 1
    with pytest.raises(RecoverableError, match="HTTP 503"):
        fetch(context, Artifact(source=server.url("/flaky")))
    fetch(context, Artifact(source=server.url("/flaky")))
    with pytest.raises(RecoverableError, match="HTTP 404"):
        fetch(context, Artifact(source=server.url("/nothing")))


def test_progress_events_carry_current_and_total(server: FileServer, context: Context) -> None:
    server.files["/big"] = b"x" * 300_000
    fetch(context, Artifact(source=server.url("/big")))
    progress = [d["progress"] for d in context.details("Downloading Artifacts") if "progress" in d]
    assert progress[-1] == {"current": 300_000, "total": 300_000}


def test_an_artifact_already_fetched_is_not_fetched_again(server: FileServer, context: Context) -> None:
    server.files["/a"] = b"a"
    artifact = Artifact(source=server.url("/a"))
    fetch(context, artifact)
    fetch(context, artifact)
    assert server.hits("/a") == 1
    fetch(context, Artifact(source=server.url("/a"), destination="local/other"))  # another artifact
    assert server.hits("/a") == 2


# -- file sources ----------------------------------------------------------------

def test_a_file_source_must_be_under_an_allowed_directory(tmp_path: Path, context: Context) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "tool").write_bytes(APP)
    (tmp_path / "secret").write_text("no")
    config = ArtifactsConfig(file_dirs=(allowed,))
    fetch(context, Artifact(source=f"file://{allowed}/tool"), config=config)
    assert tree(context.task_dir / "local") == {"tool": APP.decode()}
    with pytest.raises(ArtifactError, match="not under a directory"):
        fetch(context, Artifact(source=f"{allowed}/../secret", destination="local/s"), config=config)
    with pytest.raises(ArtifactError, match="must be an absolute path"):
        fetch(context, Artifact(source="relative/tool", destination="local/r"), config=config)
    with pytest.raises(ArtifactError, match="none configured"):
        fetch(context, Artifact(source=f"file://{allowed}/tool", destination="local/t"))
    assert "s" not in tree(context.task_dir / "local")


# -- what must be refused ----------------------------------------------------------

OUTSIDE = "outside-marker"

TRICKS = {
    "zip-slip": tar_bytes([("ok", b"1"), (f"../../{OUTSIDE}", b"evil")]),
    "absolute name": tar_bytes([("ok", b"1"), (f"/tmp/{OUTSIDE}", b"evil")]),
    "dot-dot in the middle": tar_bytes([(f"a/../../{OUTSIDE}", b"evil")]),
    "symlink out, absolute": tar_bytes([tar_link("etc", "/etc")]),
    "symlink out, relative": tar_bytes([tar_link("up", "../..")]),
    "write through a symlink": tar_bytes([tar_link("d", "."), (f"d/{OUTSIDE}", b"fine"),
                                          tar_link("d/x", f"../../{OUTSIDE}")]),
    "symlink chain": tar_bytes([tar_link("a", "b/.."), tar_link("b", "."), tar_link("a/c", "..")]),
    "hard link out": tar_bytes([tar_link("passwd", "/etc/passwd", hard=True)]),
    "hard link up": tar_bytes([tar_link("x", f"../{OUTSIDE}", hard=True)]),
    "hard link to a link": tar_bytes([tar_link("l", "ok"), ("ok", b"1"), tar_link("h", "l", hard=True)]),
    "character device": tar_bytes([tar_special("null", tarfile.CHRTYPE)]),
    "block device": tar_bytes([tar_special("sda", tarfile.BLKTYPE)]),
    "fifo": tar_bytes([tar_special("pipe", tarfile.FIFOTYPE)]),
}


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_a_traversal_trick_is_refused_with_nothing_written(server: FileServer, context: Context, trick: str,
                                                           tmp_path: Path) -> None:
    server.files["/evil.tar"] = TRICKS[trick]
    before = tree(tmp_path)
    with pytest.raises(ArtifactError, match="unsafe archive"):
        fetch(context, Artifact(source=server.url("/evil.tar"), destination="local/deep/er"))
    assert tree(tmp_path) == before
    assert not list(tmp_path.rglob(f"*{OUTSIDE}*"))
    assert context.types()[-1] == "Failed Artifact Download"


@pytest.mark.parametrize("trick", ["zip-slip", "absolute", "symlink out"])
def test_a_zip_trick_is_refused(server: FileServer, context: Context, trick: str, tmp_path: Path) -> None:
    archives = {
        "zip-slip": zip_bytes([("ok", b"1"), (f"../../{OUTSIDE}", b"evil")]),
        "absolute": zip_bytes([(f"/tmp/{OUTSIDE}", b"evil")]),
        "symlink out": zip_bytes([], links=[("l", "../../../..")]),
    }
    server.files["/evil.zip"] = archives[trick]
    before = tree(tmp_path)
    with pytest.raises(ArtifactError, match="unsafe archive"):
        fetch(context, Artifact(source=server.url("/evil.zip")))
    assert tree(tmp_path) == before


@pytest.mark.parametrize("destination", ["local/out", "local/out/deeper", "alloc/data/out"])
def test_a_destination_reached_through_a_link_is_refused(server: FileServer, context: Context, tmp_path: Path,
                                                         destination: str) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (context.task_dir / "local/out").symlink_to(outside)
    (context.ctx.task_dir.alloc_dir / "data/out").symlink_to(context.task_dir / "local")
    server.files["/a"] = b"a"
    with pytest.raises(RecoverableError, match=f"destination {destination}: (local|alloc/data)/out: a link; not"):
        fetch(context, Artifact(source=server.url("/a"), destination=destination))
    assert list(outside.iterdir()) == []
    assert context.types()[-1] == "Failed Artifact Download"


def test_a_link_left_in_the_destination_is_replaced_not_written_through(server: FileServer, context: Context,
                                                                        tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (context.task_dir / "local" / "bin").symlink_to(outside)
    server.files["/app.tar"] = tar_bytes([("bin/app.sh", APP)])
    fetch(context, Artifact(source=server.url("/app.tar")))
    assert list(outside.iterdir()) == []
    assert tree(context.task_dir / "local") == {"bin/app.sh": APP.decode()}


def test_size_and_count_limits(server: FileServer, context: Context) -> None:
    server.files["/bomb.gz"] = gzip.compress(b"\0" * 1_000_000)
    server.files["/many.tar"] = tar_bytes([(f"f{i}", b"") for i in range(20)])
    server.files["/big"] = b"x" * 5000
    config = ArtifactsConfig(max_unpacked_size=100_000, max_files=10)
    with pytest.raises(ArtifactError, match="more than 100000 bytes"):
        fetch(context, Artifact(source=server.url("/bomb.gz")), config=config)
    with pytest.raises(ArtifactError, match="more than 10 members"):
        fetch(context, Artifact(source=server.url("/many.tar")), config=config)
    with pytest.raises(ArtifactError, match="over the limit of 4000"):
        fetch(context, Artifact(source=server.url("/big")), config=ArtifactsConfig(max_download_size=4000))
    assert tree(context.task_dir) == {}


def test_a_corrupt_archive_is_named(server: FileServer, context: Context) -> None:
    server.files["/app.tar.gz"] = b"not gzip at all"
    with pytest.raises(ArtifactError, match=r"not a valid tar\.gz archive"):
        fetch(context, Artifact(source=server.url("/app.tar.gz")))


def test_redirects_are_followed_up_to_a_limit(server: FileServer, context: Context) -> None:
    server.files["/app"] = APP
    server.redirects["/old"] = server.url("/app")
    fetch(context, Artifact(source=server.url("/old"), destination="local/bin", mode="file"))
    assert tree(context.task_dir / "local") == {"bin": APP.decode()}
    server.redirects["/loop"] = server.url("/loop")
    with pytest.raises(RecoverableError, match="more than 10 redirects"):
        fetch(context, Artifact(source=server.url("/loop")))
    assert server.hits("/loop") == 11


def test_mode_file_replaces_a_link_and_refuses_one_on_the_way(server: FileServer, context: Context,
                                                             tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "blob").write_text("host")
    (context.task_dir / "local/blob").symlink_to(outside / "blob")
    (context.task_dir / "local/dir").symlink_to(outside)
    server.files["/blob"] = b"artifact"
    fetch(context, Artifact(source=server.url("/blob"), destination="local/blob", mode="file"))
    assert tree(context.task_dir / "local") == {"blob": "artifact", "dir": f"-> {outside}"}
    with pytest.raises(RecoverableError, match="local/dir: a link"):
        fetch(context, Artifact(source=server.url("/blob"), destination="local/dir/blob", mode="file"))
    assert (outside / "blob").read_text() == "host"


def _raw_header(name: str, type: bytes, size: int = 0) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = type, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


@pytest.mark.parametrize("archive,error", [
    (_raw_header("s", tarfile.GNUTYPE_SPARSE) + b"\0" * 1024, "sparse file"),
    (_raw_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 2 << 20) + b"\0" * 1024, "a header of 2097152 bytes"),
    (tar_bytes([tar_link(f"l{i}", "x") for i in range(11)]), "more than 10 members"),
    (_raw_header("./", tarfile.DIRTYPE) * 11 + b"\0" * 1024, "more than 10 members"),
])
def test_tar_headers_are_checked_before_they_are_read(server: FileServer, context: Context, archive: bytes,
                                                      error: str) -> None:
    server.files["/x.tar"] = archive
    with pytest.raises(ArtifactError, match=error):
        fetch(context, Artifact(source=server.url("/x.tar")), config=ArtifactsConfig(max_files=10))
    assert tree(context.task_dir) == {}


def test_a_tar_stream_is_capped_headers_and_padding_included(server: FileServer, context: Context) -> None:
    server.files["/x.tar.gz"] = tar_bytes([(f"f{i}", b"") for i in range(50)], "gz")  # 25 KiB of headers
    with pytest.raises(ArtifactError, match="more than 20000 bytes"):
        fetch(context, Artifact(source=server.url("/x.tar.gz")), config=ArtifactsConfig(max_unpacked_size=20_000))


def test_the_configuration_table_is_checked() -> None:
    assert ArtifactsConfig.from_table({"max_files": 3, "file_dirs": ["/srv"]}).file_dirs == (Path("/srv"),)
    assert ArtifactsConfig().download_timeout == 1800
    assert ArtifactsConfig.from_table({"download_timeout": "2m", "timeout": 5}).download_timeout == 120
    assert ArtifactsConfig().ssh_known_hosts == Path("/etc/ssh/ssh_known_hosts")
    assert ArtifactsConfig.from_table({"ssh_known_hosts": "/srv/known"}).ssh_known_hosts == Path("/srv/known")
    with pytest.raises(ConfigError, match="has no unit"):
        ArtifactsConfig.from_table({"download_timeout": "10"})
    with pytest.raises(ConfigError, match="positive"):
        ArtifactsConfig.from_table({"download_timeout": "0s"})
    with pytest.raises(ConfigError, match="unknown key"):
        ArtifactsConfig.from_table({"max_file": 3})
    with pytest.raises(ConfigError, match="positive"):
        ArtifactsConfig.from_table({"max_files": 0})


@pytest.mark.parametrize("shape", ["plain", "with a comment", "with data before it"])
def test_a_zip_directory_is_read_from_its_end_record(server: FileServer, context: Context, shape: str) -> None:
    data = zip_bytes([("a.txt", b"a"), ("dir/b.txt", b"b")])
    if shape == "with a comment":
        buffer = io.BytesIO(data)
        with zipfile.ZipFile(buffer, "a") as zf:
            zf.comment = b"built for a test; " * 100
        data = buffer.getvalue()
    elif shape == "with data before it":
        data = b"#!/bin/sh\nexit 0\n" + data  # a self-extracting archive's stub
    server.files["/app.zip"] = data
    fetch(context, Artifact(source=server.url("/app.zip")), config=ArtifactsConfig(max_files=2))
    assert tree(context.task_dir / "local") == {"a.txt": "a", "dir/b.txt": "b"}
