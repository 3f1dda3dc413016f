"""Attacks on the credentials of an artifact's source, and a download that never ends.

A job's author writes a token into a source (``git::http://user:TOKEN@host/repo.git``,
``https://user:TOKEN@host/app.tar.gz``, ``?sshkey=KEY``). Another user of the host
reads every process's command line (``/proc/*/cmdline``, ``ps``) and herder's log; a
server that never answers holds a download. The token must show nowhere, and a
stop must end the download at once, for good.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks.artifacts import ArtifactError, ArtifactsConfig
from herder.errors import RecoverableError
from herder.model import Artifact
from tests.core.client.artifact_support import Context, Repo, fetch, tree
from tests.support.agent import AgentProcess
from tests.support.consul import free_ports
from tests.support.fileserver import FileServer, serve
from tests.support.waiting import poll, wait_for

TOKEN = "tok3n-9f2c41d7e8"  # a job's credential, looked for wherever another user may read
SSH_KEY = base64.b64encode(b"-----BEGIN OPENSSH PRIVATE KEY-----\nk3y-0c5a91\n").decode()
AUTHORIZATION = "Basic " + base64.b64encode(f"ci:{TOKEN}".encode()).decode()


class Silent:
    """A TCP server on loopback that accepts every connection and never answers;
    ``accepted`` counts the connections."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", free_ports(1)[0]))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.held.append(conn)
            self.accepted += 1

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "run")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "git")
    repo.commit({"README": "private\n"})
    repo.publish()
    return repo


@pytest.fixture
def git_server(repo: Repo) -> Iterator[FileServer]:
    yield from serve(git_root=repo.bare.parent)


def command_lines() -> dict[int, str]:
    """Every process's command line, as another user of the host reads it."""
    lines = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                lines[int(entry.name)] = Path(entry.path, "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:  # gone meanwhile
                continue
    return lines


def fetching(port: int) -> list[int]:
    """The processes fetching from the loopback port ``port`` (git and its remote helper)."""
    return [pid for pid, line in command_lines().items() if f"127.0.0.1:{port}" in line and "git" in line]


def gone(pids: list[int]) -> bool:
    return all(not Path(f"/proc/{pid}").exists() for pid in pids)


def in_background(context: Context, artifact: Artifact) -> tuple[threading.Thread, list[BaseException]]:
    """The artifacts plugin's prestart in a thread; what it raised, once it ends."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            fetch(context, artifact, config=ArtifactsConfig(download_timeout=60))
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, raised


@pytest.mark.parametrize("trickling", [False, True], ids=["silent", "trickling"])
def test_a_git_token_is_in_no_command_line_and_a_stop_kills_the_hanging_fetch(
        context: Context, silent: Silent, trickling: bool) -> None:
    """While git waits on a server that never answers (or sends a byte an hour), no process's
    command line holds the token; stopping the task kills git and ends the prestart."""
    files = FileServer(files={"/slow.git/info/refs": b"001e# service=git-upload-pack\n"},
                       trickle={"/slow.git/info/refs": 3600})
    if trickling:
        files.start()
    port = files.port if trickling else silent.port
    thread, raised = in_background(context, Artifact(source=f"git::http://ci:{TOKEN}@127.0.0.1:{port}/slow.git",
                                                     destination="local/repo"))
    try:
        pids = wait_for(lambda: fetching(port), what=f"git fetching from port {port}")
        leaking = {pid: line for pid, line in command_lines().items() if TOKEN in line}
        assert leaking == {}, leaking
        context.ctx.stopping.set()
        thread.join(30)
        assert not thread.is_alive(), "the prestart went on after the stop"
        wait_for(lambda: gone(pids), what=f"git's processes {pids} gone")
        [stopped] = raised
        assert isinstance(stopped, RecoverableError) and "stopped while downloading artifact 0" in str(stopped)
        assert TOKEN not in str(stopped) and "ci:redacted@" in str(stopped)
        assert "Failed Artifact Download" not in context.types()
    finally:
        context.ctx.stopping.set()
        thread.join(60)
        files.stop()


def test_a_stop_closes_a_hanging_http_download(context: Context, silent: Silent) -> None:
    thread, raised = in_background(context, Artifact(source=f"http://ci:{TOKEN}@127.0.0.1:{silent.port}/app.tar"))
    try:
        wait_for(lambda: silent.accepted, what="the download's connection")
        context.ctx.stopping.set()
        thread.join(30)
        assert not thread.is_alive(), "the prestart went on after the stop"
        assert "stopped while downloading artifact 0" in str(raised[0])
        wait_for(lambda: silent.held[0].recv(1 << 16) == b"" or None, what="the connection closed by herder")
    finally:
        context.ctx.stopping.set()
        thread.join(60)


def test_git_is_given_the_credentials_and_no_file_keeps_them(git_server: FileServer, context: Context) -> None:
    """The server insists on the credentials: git has them, through the helper, and neither the
    task's files nor anything herder staged holds the token (no ``.git/config``, no ``FETCH_HEAD``)."""
    git_server.required_headers["Authorization"] = AUTHORIZATION
    kept: list[str] = []
    real_rmtree = shutil.rmtree

    def keep(path: str, *args: object, **kwargs: object) -> None:
        kept.extend(str(p) + "\n" + p.read_text(errors="replace") for p in Path(path).rglob("*") if p.is_file())
        real_rmtree(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("herder.client.hooks.artifacts.shutil.rmtree", keep)
        fetch(context, Artifact(source=f"git::http://ci:{TOKEN}@127.0.0.1:{git_server.port}/git/repo.git",
                                destination="local/repo"))
    assert tree(context.task_dir / "local") == {"repo/README": "private\n"}
    assert any(headers.get("Authorization") == AUTHORIZATION for _, headers in git_server.requests)
    assert any("FETCH_HEAD" in text for text in kept)
    assert [text.split("\n")[0] for text in kept if TOKEN in text] == []
    assert [p for p in context.root.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()] == []


def test_an_http_download_sends_its_credentials_as_a_header_only(context: Context) -> None:
    for server in serve():
        server.required_headers["Authorization"] = AUTHORIZATION
        server.files["/app.sh"] = b"#!/bin/sh\n"
        fetch(context, Artifact(source=f"http://ci:{TOKEN}@127.0.0.1:{server.port}/app.sh"))
        assert tree(context.task_dir / "local") == {"app.sh": "#!/bin/sh\n"}
        assert [path for path, _ in server.requests if TOKEN in path] == []


def test_a_redirect_to_another_origin_gets_no_credentials(git_server: FileServer, repo: Repo,
                                                          context: Context) -> None:
    for other in serve(git_root=repo.bare.parent):
        other.required_headers["Authorization"] = AUTHORIZATION
        git_server.redirects["/moved.git/info/refs"] = other.url("/git/repo.git/info/refs?service=git-upload-pack")
        with pytest.raises(RecoverableError, match="git fetch"):
            fetch(context, Artifact(source=f"git::http://ci:{TOKEN}@127.0.0.1:{git_server.port}/moved.git",
                                    destination="local/repo"))
        assert other.requests, "the redirect was not followed"
        assert AUTHORIZATION not in str(other.requests)


@pytest.mark.parametrize("source", [
    "http://ci:{token}@127.0.0.1:{port}/missing.tar.gz",
    "git::http://ci:{token}@127.0.0.1:{port}/git/missing.git",
    "git::ssh://git@127.0.0.1:{port}/repo.git?sshkey={key}",
    "git::ssh://git:{token}@127.0.0.1:{port}/repo.git",
], ids=["http", "git-http", "git-ssh-key", "git-ssh-password"])
def test_a_failed_download_shows_the_source_redacted(git_server: FileServer, context: Context,
                                                     source: str) -> None:
    source = source.format(token=TOKEN, port=git_server.port, key=SSH_KEY)
    with pytest.raises((RecoverableError, ArtifactError)) as raised:
        fetch(context, Artifact(source=source, destination="local/x"))
    [failed] = [event for event in context.events if event.type == "Failed Artifact Download"]
    shown = failed.message + failed.details["source"] + str(raised.value)
    assert "redacted" in failed.details["source"] and "redacted" in failed.message
    assert TOKEN not in shown and SSH_KEY not in shown and "k3y-0c5a91" not in shown


JOB = """
job "secret" {{
  type = "batch"
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      artifact {{
        source      = "git::http://ci:{token}@127.0.0.1:{port}/repo.git"
        destination = "local/repo"
      }}
      config {{
        command = "/bin/true"
      }}
    }}
  }}
}}
"""


def test_stopping_the_job_kills_the_fetch_and_a_restarted_agent_does_not_fetch_again(
        tmp_path: Path, silent: Silent) -> None:
    agent = AgentProcess(tmp_path, token="api-token-5e1b").start()
    try:
        alloc = agent.submit(JOB.format(token=TOKEN, port=silent.port))["allocations"][0]["id"]
        pids = wait_for(lambda: fetching(silent.port), what="git fetching from the silent server")
        assert all(TOKEN not in line for line in command_lines().values())
        with agent.http() as http:
            assert http.delete("/v1/jobs/secret").status_code == 200
        wait_for(lambda: gone(pids), what=f"git's processes {pids} killed by the stop")
        status = agent.wait_task(alloc, "t", "dead")
        agent.terminate()
        accepted = silent.accepted
        agent.start()
        assert not poll(lambda: silent.accepted > accepted or fetching(silent.port), timeout=2)
    finally:
        agent.shutdown()
    events = " ".join(f"{e['type']}: {e['message']} {e.get('details', '')}" for e in status["events"])
    assert TOKEN not in events and "ci:redacted@" in events
    assert TOKEN not in agent.log.read_text()
