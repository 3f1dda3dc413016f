"""Attacks on artifact downloads: a task racing herder, a hostile archive, a hostile server.

Every attack goes through the artifacts plugin against a real HTTP(S) server
on loopback, with archives built here. The race is made deterministic: the
server calls the test back after the response headers, before the body, and
the test swaps the directory then.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks import git
from herder.client.hooks.archives import Limits
from herder.client.hooks.artifacts import ArtifactError, ArtifactsConfig
from herder.errors import RecoverableError
from herder.model import Artifact
from tests.core.client.artifact_support import Context, Repo, fetch, tar_bytes, tree
from tests.support.fileserver import FileServer, serve
from tests.support.tls import make_certificates

REPO = Path(__file__).resolve().parents[2]
APP = b"#!/bin/sh\necho hello\n"


@pytest.fixture
def server() -> Iterator[FileServer]:
    yield from serve()


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "run")


@pytest.fixture
def host_dir(tmp_path: Path) -> Path:
    """A directory of the host's that a task must never get herder to write into."""
    path = tmp_path / "host"
    path.mkdir()
    return path


# -- a task racing herder -----------------------------------------------------------

@pytest.mark.parametrize("swapped", ["local/d", "local"])
def test_a_destination_swapped_for_a_link_during_the_download_is_refused(
        server: FileServer, context: Context, host_dir: Path, swapped: str) -> None:
    """The destination (or its parent) is a real directory when herder checks it, and a
    link to a host directory by the time herder writes."""
    (context.task_dir / "local/d").mkdir()

    def swap() -> None:
        victim = context.task_dir / swapped
        victim.rename(victim.with_name(victim.name + ".moved"))
        victim.symlink_to(host_dir)

    server.files["/app.tar"] = tar_bytes([("bin/app.sh", APP)])
    server.before_body["/app.tar"] = swap
    with pytest.raises(RecoverableError, match=f"destination local/d: {swapped}: a link; not followed"):
        fetch(context, Artifact(source=server.url("/app.tar"), destination="local/d"))
    assert tree(host_dir) == {}
    [failed] = [event for event in context.events if event.type == "Failed Artifact Download"]
    assert f"{swapped}: a link" in failed.message and failed.details["recoverable"]


def test_the_staging_directory_is_out_of_the_tasks_reach(server: FileServer, context: Context,
                                                        host_dir: Path) -> None:
    """Whatever herder stages while it downloads, a task cannot swap it for a link out."""
    found: list[str] = []

    def swap_staging() -> None:
        for staging in [*context.task_dir.rglob(".herder-*"), *context.ctx.task_dir.alloc_dir.rglob(".herder-*")]:
            found.append(staging.name)
            staging.rename(staging.with_name(staging.name + ".moved"))
            staging.symlink_to(host_dir)

    server.files["/app.tar"] = tar_bytes([("bin/app.sh", APP)])
    server.before_body["/app.tar"] = swap_staging
    fetch(context, Artifact(source=server.url("/app.tar")))
    assert found == []
    assert tree(host_dir) == {}
    assert tree(context.task_dir / "local") == {"bin/app.sh": APP.decode()}


# -- a hostile archive ----------------------------------------------------------------

def _header(name: str, type: bytes, size: int = 0) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = type, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _padded(payload: bytes) -> bytes:
    return payload + b"\0" * (-len(payload) % tarfile.BLOCKSIZE)


END = b"\0" * (2 * tarfile.BLOCKSIZE)
DOT = _header("./", tarfile.DIRTYPE)
HUGE = 256 << 20  # bytes of one header's payload: what the unchecked code read into memory


def _pax(records: bytes) -> bytes:
    return _header("././@PaxHeader", tarfile.XHDTYPE, len(records)) + _padded(records)


def _record(key: bytes, value: bytes) -> bytes:
    """A pax record, ``LENGTH key=value\\n``, its length counting its own digits."""
    body = b" " + key + b"=" + value + b"\n"
    length = len(body) + len(str(len(body)))
    length = len(body) + len(str(length))
    return str(length).encode() + body


def hostile_tar(kind: str) -> bytes:
    """A tar stream (uncompressed) of ``kind``: far over the default limit of 100000
    members in header-only entries, or one header with a huge payload."""
    if kind == "200k ./ members":
        return DOT * 200_001 + END
    if kind == "100k GNU longname headers":
        longname = _header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 3) + _padded(b"./\0")
        return longname * 100_001 + DOT + END
    if kind == "100k global pax headers":
        record = _record(b"comment", b"x" * 8)
        return (_header("././@PaxHeader", tarfile.XGLTYPE, len(record)) + _padded(record)) * 100_001 + DOT + END
    if kind == "100k pax headers before members":
        return (_pax(_record(b"path", b"./")) + DOT) * 100_001 + END
    if kind == "a 256 MiB GNU longname":
        return _header("././@LongLink", tarfile.GNUTYPE_LONGNAME, HUGE) + b"x" * HUGE + DOT + END
    if kind == "a 256 MiB pax header":
        return _pax(_record(b"comment", b"x" * HUGE)) + DOT + END
    raise AssertionError(kind)


CHILD = """
import json, re, sys
from pathlib import Path
from herder.client.hooks.artifacts import ArtifactError
from herder.model import Artifact
from tests.core.client.artifact_support import Context, fetch

def peak():
    # VmHWM, not getrusage's ru_maxrss: that one is kept across exec, so it starts at the test's own peak.
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmHWM:\\s+(\\d+) kB", status, re.M).group(1))

warm_up, url, root = sys.argv[1:]
fetch(Context(Path(root) / "warm"), Artifact(source=warm_up))  # the HTTP client's own setup is not counted
before = peak()
try:
    fetch(Context(Path(root) / "run"), Artifact(source=url))
    error = None
except ArtifactError as exc:
    error = str(exc)
print(json.dumps({"error": error, "growth": (peak() - before) * 1024}))
"""

MEMORY_BOUND = 16 << 20
"""Peak RSS growth allowed while refusing one hostile archive. Streaming an archive takes a
few MiB; the unchecked code grew by 70 MiB to 1 GiB on these archives."""


def fetch_in_a_fresh_process(server: FileServer, path: str, tmp_path: Path) -> dict[str, object]:
    """Fetch ``path`` with the default configuration in a child process: its error and peak RSS growth."""
    server.files["/warm-up"] = b"warm"
    child = subprocess.run([sys.executable, "-c", CHILD, server.url("/warm-up"), server.url(path), str(tmp_path)],
                           cwd=REPO, capture_output=True, text=True, timeout=600)
    assert child.returncode == 0, child.stderr[-3000:]
    result: dict[str, object] = json.loads(child.stdout)
    return result


@pytest.mark.parametrize("kind", ["200k ./ members", "100k GNU longname headers", "100k global pax headers",
                                  "100k pax headers before members", "a 256 MiB GNU longname",
                                  "a 256 MiB pax header"])
def test_header_only_entries_and_huge_headers_are_refused_in_bounded_memory(
        server: FileServer, tmp_path: Path, kind: str) -> None:
    server.files["/evil.tar.gz"] = gzip.compress(hostile_tar(kind), compresslevel=1)
    result = fetch_in_a_fresh_process(server, "/evil.tar.gz", tmp_path)
    assert result["error"] is not None and "limit" in str(result["error"]), result
    assert isinstance(result["growth"], int) and result["growth"] < MEMORY_BOUND, result


def test_a_zip_central_directory_over_the_member_limit_is_refused_before_it_is_read(
        server: FileServer, tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for index in range(200_001):  # zipfile would hold every entry before the first is counted
            zf.writestr(zipfile.ZipInfo(f"{index}/" if index else "./"), b"")
    server.files["/evil.zip"] = buffer.getvalue()
    result = fetch_in_a_fresh_process(server, "/evil.zip", tmp_path)
    assert "more than 100000 members" in str(result["error"]), result
    assert isinstance(result["growth"], int) and result["growth"] < MEMORY_BOUND, result


def test_a_zip_bomb_is_refused_before_it_fills_the_disk(server: FileServer, context: Context) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for index in range(10):
            zf.writestr(f"zeros{index}", b"\0" * 10_000_000)  # 100 MB in about 100 KB
    server.files["/bomb.zip"] = buffer.getvalue()
    with pytest.raises(ArtifactError, match="more than 50000000 bytes"):
        fetch(context, Artifact(source=server.url("/bomb.zip")), config=ArtifactsConfig(max_unpacked_size=50_000_000))
    assert tree(context.task_dir) == {}


def test_setuid_setgid_and_sticky_bits_are_dropped(server: FileServer, context: Context) -> None:
    members: list[tarfile.TarInfo | tuple[str, bytes]] = []
    for name, mode, kind in [("bin", 0o3777, tarfile.DIRTYPE), ("bin/su", 0o6755, tarfile.REGTYPE),
                             ("bin/sticky", 0o1777, tarfile.REGTYPE)]:
        info = tarfile.TarInfo(name)
        info.mode, info.type = mode, kind
        members.append(info)
    hard = tarfile.TarInfo("bin/su2")
    hard.type, hard.linkname, hard.mode = tarfile.LNKTYPE, "bin/su", 0o6755
    members.append(hard)
    server.files["/app.tar"] = tar_bytes(members)
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        info = zipfile.ZipInfo("zsu")
        info.external_attr = 0o106755 << 16
        zf.writestr(info, APP)
    server.files["/app.zip"] = zipped.getvalue()
    fetch(context, Artifact(source=server.url("/app.tar")), Artifact(source=server.url("/app.zip")))
    modes = {path.name: path.stat().st_mode for path in (context.task_dir / "local").rglob("*")}
    assert sorted(modes) == ["bin", "sticky", "su", "su2", "zsu"]
    assert {name: mode & 0o7000 for name, mode in modes.items() if mode & 0o7000} == {}
    assert modes["su"] & 0o777 == modes["su2"] & 0o777 == modes["zsu"] & 0o777 == 0o755


# -- a hostile server -------------------------------------------------------------------

def test_a_trickling_server_hits_the_download_deadline(server: FileServer, context: Context) -> None:
    """A byte every 50 ms never trips the read timeout; only the overall deadline ends it."""
    server.files["/slow"] = b"x" * 2000  # 100 s at that pace
    server.trickle["/slow"] = 0.05
    config = ArtifactsConfig.from_table({"download_timeout": "1s"})
    started = time.monotonic()
    with pytest.raises(RecoverableError, match="download_timeout"):
        fetch(context, Artifact(source=server.url("/slow")), config=config)
    assert time.monotonic() - started < 30
    assert tree(context.task_dir) == {}


def test_a_redirect_from_https_to_http_is_refused(server: FileServer, context: Context, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    certificates = make_certificates(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
    server.files["/app"] = APP
    for secure in serve(tls=(certificates.cert, certificates.key)):
        secure.files["/app"] = APP
        fetch(context, Artifact(source=secure.url("/app"), destination="local/trusted"))  # the TLS server works
        secure.redirects["/moved"] = server.url("/app")
        with pytest.raises(ArtifactError, match=f"{secure.url('/moved')}.*{server.url('/app')}"):
            fetch(context, Artifact(source=secure.url("/moved")))
    assert server.hits("/app") == 0
    assert tree(context.task_dir / "local") == {"trusted/app": APP.decode()}
    assert os.listdir(context.task_dir / "local") == ["trusted"]


# -- a hostile git repository or URL ---------------------------------------------------------

@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[FileServer]:
    yield from serve(git_root=tmp_path / "git" / "served")


@pytest.mark.parametrize("link", ["absolute", "relative"])
def test_a_git_repository_with_a_link_out_is_refused_and_leaves_nothing(
        git_server: FileServer, context: Context, host_dir: Path, tmp_path: Path, link: str) -> None:
    """A link committed to the repository pointing at a host directory: kept, it would let the
    task (or a later artifact) write there."""
    repo = Repo(tmp_path / "git")
    target = str(host_dir) if link == "absolute" else os.path.relpath(host_dir, context.task_dir / "local/repo")
    repo.commit({"README": "hi\n"}, links={"escape": target})
    repo.publish()
    with pytest.raises(ArtifactError, match="unsafe archive: link 'escape' points"):
        fetch(context, Artifact(source=f"git::{git_server.url('/git/repo.git')}", destination="local/repo"))
    assert tree(context.task_dir / "local") == {}
    assert not list(context.root.glob(".herder-artifact-*"))


def test_a_git_source_over_another_transport_is_refused(context: Context, tmp_path: Path) -> None:
    """``ext::`` runs a command; ``ssh://-o...`` passes an option to ssh: neither runs anything."""
    marker = tmp_path / "ran"
    for source in (f"git::ext::sh -c touch% {marker}", f"git::ssh://-oProxyCommand=touch%20{marker}/repo.git",
                   "git::fd::3"):
        with pytest.raises((ArtifactError, RecoverableError)):
            fetch(context, Artifact(source=source, destination="local/r"))
    assert not marker.exists()
    ext, ssh, fd = (event.message for event in context.events if event.type == "Failed Artifact Download")
    assert "git sources are fetched over https, http, ssh, file, not 'ext'" in ext
    assert "strange hostname" in ssh and "not 'fd'" in fd


def test_git_itself_refuses_every_transport_but_the_sources(tmp_path: Path) -> None:
    """The same, one level down: git run as herder runs it refuses ``ext::`` (a command) and
    ``file://`` (the host's repositories) for an https source."""
    marker, secret = tmp_path / "ran", tmp_path / "secret.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(secret)], check=True)
    limits = git.GitLimits(max_download_size=1 << 20, unpacked=Limits(1 << 20, 100),
                           deadline=time.monotonic() + 60, known_hosts=Path("/dev/null"))
    for url in (f"ext::sh -c touch% {marker}", secret.as_uri()):
        work = tmp_path / f"work{len(url)}"
        work.mkdir()
        with pytest.raises(git.GitError, match="not allowed"):
            git.fetch_tree(git.GitSource(url, "https"), work, tmp_path / "out", limits, lambda n, total: None)
    assert not marker.exists()


def test_a_git_fetch_gets_neither_roots_ssh_agent_nor_its_keys(context: Context, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """ssh (a stand-in that records how it was run) sees no agent, no config, no identity of
    root's: a job cannot reach what root's keys can."""
    seen = tmp_path / "seen"
    fake_ssh = tmp_path / "bin" / "ssh"
    fake_ssh.parent.mkdir()
    fake_ssh.write_text(f"#!/bin/sh\necho \"agent=$SSH_AUTH_SOCK home=$HOME $*\" > {seen}\nexit 255\n")
    fake_ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_ssh.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/run/root-agent.sock")
    with pytest.raises(RecoverableError, match="git fetch"):
        fetch(context, Artifact(source="git::ssh://git@127.0.0.1:2222/repo.git", destination="local/r"))
    args = seen.read_text()
    assert "agent= " in args and "home=/root" not in args
    assert all(option in args for option in ("-F /dev/null", "IdentityFile=none", "IdentityAgent=none",
                                              "IdentitiesOnly=yes", "StrictHostKeyChecking=yes"))


def test_a_git_source_over_https_is_not_redirected_to_http(git_server: FileServer, context: Context,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Repo(tmp_path / "git")
    repo.commit({"README": "hi\n"})
    repo.publish()
    certificates = make_certificates(tmp_path / "tls")
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates.ca))
    for secure in serve(tls=(certificates.cert, certificates.key), git_root=repo.bare.parent):
        fetch(context, Artifact(source=f"git::{secure.url('/git/repo.git')}", destination="local/trusted"))
        secure.redirects["/moved.git/info/refs"] = git_server.url("/git/repo.git/info/refs?service=git-upload-pack")
        with pytest.raises(RecoverableError, match="git fetch"):
            fetch(context, Artifact(source=f"git::{secure.url('/moved.git')}", destination="local/moved"))
    assert git_server.requests == []
    assert tree(context.task_dir / "local") == {"trusted/README": "hi\n"}
