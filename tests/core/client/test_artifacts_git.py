"""``git::`` artifacts: real repositories made here, served by ``git http-backend`` on loopback
(behind the test file server) and as ``file://`` repositories under ``file_dirs``."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from herder.client.hooks import git
from herder.client.hooks.artifacts import ArtifactError, ArtifactsConfig
from herder.errors import RecoverableError
from herder.model import Artifact
from tests.core.client.artifact_support import Context, Repo, fetch, run_git, tree
from tests.support.fileserver import FileServer, serve


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "git")
    repo.commit({"README": "one\n"}, "one")
    repo.commit({"README": "two\n", "bin/run.sh": "#!/bin/sh\n"}, "two")
    run_git(repo.work, "tag", "--annotate", "--message", "v1", "v1")
    run_git(repo.work, "checkout", "--quiet", "-b", "feature")
    repo.commit({"FEATURE": "yes\n"}, "feature")
    run_git(repo.work, "checkout", "--quiet", "main")
    repo.commit({"README": "three\n"}, "three")
    repo.publish()
    return repo


@pytest.fixture
def server(repo: Repo) -> Iterator[FileServer]:
    yield from serve(git_root=repo.bare.parent)


@pytest.fixture
def context(tmp_path: Path) -> Context:
    return Context(tmp_path / "run")


def git_artifact(server: FileServer, destination: str = "local/repo", **options: str) -> Artifact:
    return Artifact(source=f"git::{server.url('/git/repo.git')}", destination=destination, options=options)


def test_the_default_branch_is_fetched_without_git_metadata(server: FileServer, context: Context) -> None:
    fetch(context, git_artifact(server))
    assert tree(context.task_dir / "local/repo") == {"README": "three\n", "bin/run.sh": "#!/bin/sh\n"}
    assert os.stat(context.task_dir / "local/repo/bin/run.sh").st_mode & 0o777 == 0o755
    assert os.stat(context.task_dir / "local/repo/README").st_mode & 0o777 == 0o644
    assert any("git-upload-pack" in path for path, _ in server.requests)


def test_a_branch_a_tag_and_options_in_the_url(server: FileServer, context: Context) -> None:
    fetch(context, git_artifact(server, "local/feature", ref="feature"),
          git_artifact(server, "local/tag", ref="v1", depth="1"),
          Artifact(source=f"git::{server.url('/git/repo.git')}?ref=feature&depth=1", destination="local/query"))
    local = context.task_dir / "local"
    assert tree(local / "feature") == {"FEATURE": "yes\n", "README": "two\n", "bin/run.sh": "#!/bin/sh\n"}
    assert tree(local / "tag") == {"README": "two\n", "bin/run.sh": "#!/bin/sh\n"}
    assert tree(local / "query") == tree(local / "feature")


def test_a_commit_with_depth_and_an_abbreviated_one(repo: Repo, server: FileServer, context: Context) -> None:
    first = run_git(repo.work, "rev-parse", "main~2")
    fetch(context, git_artifact(server, "local/full", ref=first, depth="1"),
          git_artifact(server, "local/short", ref=first[:10]))
    assert tree(context.task_dir / "local/full") == {"README": "one\n"}
    assert tree(context.task_dir / "local/short") == {"README": "one\n"}


def test_progress_is_reported_in_objects(server: FileServer, context: Context) -> None:
    fetch(context, git_artifact(server))
    [*_, last] = context.details("Downloading Artifacts")
    assert last["progress"]["current"] == last["progress"]["total"] > 0


def test_a_missing_ref_or_repository_is_named_and_leaves_nothing(server: FileServer, context: Context) -> None:
    with pytest.raises(RecoverableError, match=r"git fetch .*nope"):
        fetch(context, git_artifact(server, ref="nope"))
    with pytest.raises(RecoverableError, match=r"git fetch .*/git/missing\.git"):
        fetch(context, Artifact(source=f"git::{server.url('/git/missing.git')}", destination="local/repo"))
    assert tree(context.task_dir / "local") == {}


def test_a_file_repository_must_be_under_file_dirs(repo: Repo, context: Context, tmp_path: Path) -> None:
    source = Artifact(source=f"git::file://{repo.bare}", destination="local/repo", options={"depth": "1"})
    with pytest.raises(ArtifactError, match=r"not under a directory .* file_dirs"):
        fetch(context, source)
    fetch(context, source, config=ArtifactsConfig(file_dirs=(repo.bare.parent,)))
    assert tree(context.task_dir / "local/repo") == {"README": "three\n", "bin/run.sh": "#!/bin/sh\n"}


def test_a_link_inside_is_kept(repo: Repo, server: FileServer, context: Context) -> None:
    repo.commit({}, "link", links={"bin/latest": "run.sh"})
    repo.publish()
    fetch(context, git_artifact(server))
    assert (context.task_dir / "local/repo/bin/latest").readlink() == Path("run.sh")


def test_limits_apply_to_the_tree_and_the_fetch(repo: Repo, server: FileServer, context: Context) -> None:
    repo.commit({f"many/{i}": str(i) for i in range(30)} | {"big": os.urandom(20_000).hex()}, "big")
    repo.publish()
    with pytest.raises(ArtifactError, match="more than 10 members"):
        fetch(context, git_artifact(server), config=ArtifactsConfig(max_files=10))
    with pytest.raises(ArtifactError, match="more than 10000 bytes"):
        fetch(context, git_artifact(server), config=ArtifactsConfig(max_unpacked_size=10_000))
    with pytest.raises(ArtifactError, match="repository is over the limit of 1000 bytes"):
        fetch(context, git_artifact(server), config=ArtifactsConfig(max_download_size=1000))
    assert tree(context.task_dir / "local") == {}


def test_the_deadline_kills_git(server: FileServer, context: Context) -> None:
    """A server that answers the first request with headers and then a byte an hour."""
    server.files["/slow.git/info/refs"] = b"001e# service=git-upload-pack\n"
    server.trickle["/slow.git/info/refs"] = 3600
    with pytest.raises(RecoverableError, match="not done within the artifact's deadline"):
        fetch(context, Artifact(source=f"git::{server.url('/slow.git')}", destination="local/repo"),
              config=ArtifactsConfig(download_timeout=1))
    assert tree(context.task_dir / "local") == {}


def test_other_getters_and_bad_options_are_refused(server: FileServer, context: Context) -> None:
    with pytest.raises(ArtifactError, match="go-getter's s3:: sources"):
        fetch(context, Artifact(source="s3::https://s3.amazonaws.com/bucket/key"))
    with pytest.raises(ArtifactError, match="mode file cannot fetch a git repository"):
        fetch(context, Artifact(source=f"git::{server.url('/git/repo.git')}", mode="file",
                                destination="local/f"))
    with pytest.raises(ArtifactError, match=r"options\.depth 'x'"):
        fetch(context, git_artifact(server, depth="x"))
    with pytest.raises(ArtifactError, match=r"options\.sshkey is not base64"):
        fetch(context, git_artifact(server, sshkey="not base64!"))


def test_the_ssh_command_uses_only_the_jobs_key_and_known_hosts(tmp_path: Path) -> None:
    command = git.ssh_command(tmp_path / "key", Path("/etc/herder/known_hosts"))
    for option in ("-F /dev/null", "IdentitiesOnly=yes", "IdentityAgent=none", f"IdentityFile={tmp_path}/key",
                   "StrictHostKeyChecking=yes", "UserKnownHostsFile=/etc/herder/known_hosts", "BatchMode=yes"):
        assert option in command
    assert "IdentityFile=none" in git.ssh_command(None, Path("/k"))


def test_the_ssh_key_is_private_to_herder_and_gone_afterwards(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The key file, as ssh sees it while git runs: 0600, root's, in the staging directory."""
    seen = tmp_path / "seen"
    fake_ssh = tmp_path / "bin" / "ssh"
    fake_ssh.parent.mkdir()
    # A stand-in for ssh that records the key file it was given, then fails as an unreachable host would.
    fake_ssh.write_text("#!/bin/sh\nfor a; do case $a in IdentityFile=*) k=${a#IdentityFile=};; esac; done\n"
                        f"stat -c '%a %U' \"$k\" > {seen}; echo \"$k\" >> {seen}; cat \"$k\" >> {seen}; exit 255\n")
    fake_ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_ssh.parent}:{os.environ['PATH']}")
    context = Context(tmp_path / "run")
    with pytest.raises(RecoverableError, match="git fetch"):
        fetch(context, Artifact(source="git::ssh://git@127.0.0.1:2222/repo.git", destination="local/r",
                                options={"sshkey": base64.b64encode(b"PRIVATE KEY").decode()}))
    mode, path, key = seen.read_text().splitlines()
    assert (mode, key) == ("600 root", "PRIVATE KEY")
    assert Path(path).is_relative_to(context.root) and not Path(path).is_relative_to(context.task_dir)
    assert not list(context.root.glob(".herder-artifact-*"))


def test_a_file_repository_of_another_user_is_refused_as_git_refuses_it(repo: Repo, context: Context) -> None:
    """git's own check (a repository another user could have crafted runs code of theirs): kept."""
    for directory, _, files in os.walk(repo.bare):
        for name in (directory, *(os.path.join(directory, f) for f in files)):
            os.chown(name, 65534, 65534)
    with pytest.raises(RecoverableError, match="dubious ownership"):
        fetch(context, Artifact(source=f"git::file://{repo.bare}", destination="local/repo"),
              config=ArtifactsConfig(file_dirs=(repo.bare.parent,)))
    assert tree(context.task_dir / "local") == {}
