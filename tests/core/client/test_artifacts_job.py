"""Artifacts in a running job: a real server, real raw_exec tasks, the restart policy."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.core.client.artifact_support import Repo, tar_bytes
from tests.support.fileserver import FileServer, serve
from tests.support.running import run_job

SCRIPT = b"#!/bin/sh\necho \"ran $1\" >> \"$NOMAD_ALLOC_DIR/data/runs\"\nexit $2\n"


@pytest.fixture
def server() -> Iterator[FileServer]:
    yield from serve()


def job(source: str, exit_code: int, attempts: int = 1, checksum: str = "") -> str:
    options = f'options {{\n checksum = "{checksum}"\n }}' if checksum else ""
    return f'''
job "j" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = {attempts}
      delay    = "100ms"
      interval = "1m"
      mode     = "fail"
    }}
    task "t" {{
      driver = "raw_exec"
      artifact {{
        source = "{source}"
        {options}
      }}
      config {{
        command = "local/bin/run.sh"
        args    = ["once", "{exit_code}"]
      }}
    }}
  }}
}}
'''


def test_the_task_runs_what_the_artifact_brought(server: FileServer, data_dir: Path) -> None:
    archive = tar_bytes([("bin/run.sh", SCRIPT)], "gz")
    server.files["/app.tar.gz"] = archive
    checksum = "sha256:" + hashlib.sha256(archive).hexdigest()
    run = run_job(job(server.url("/app.tar.gz"), 0, checksum=checksum), data_dir)
    assert run.status == "complete", run.types()
    assert run.types()[:3] == ["Received", "Task Setup", "Downloading Artifacts"]
    [runs] = data_dir.glob("allocs/*/alloc/data/runs")
    assert runs.read_text() == "ran once\n"


def test_a_failed_download_is_retried_under_the_restart_policy(server: FileServer, data_dir: Path) -> None:
    server.files["/app.tar.gz"] = tar_bytes([("bin/run.sh", SCRIPT)], "gz")
    server.failures["/app.tar.gz"] = 1
    run = run_job(job(server.url("/app.tar.gz"), 0), data_dir)
    assert run.status == "complete", run.types()
    types = run.types("t")
    assert types.index("Failed Artifact Download") < types.index("Restarting") < types.index("Started")
    assert server.hits("/app.tar.gz") == 2


def test_a_restarted_task_does_not_fetch_its_artifacts_again(server: FileServer, data_dir: Path) -> None:
    server.files["/app.tar.gz"] = tar_bytes([("bin/run.sh", SCRIPT)], "gz")
    run = run_job(job(server.url("/app.tar.gz"), 1, attempts=2), data_dir)
    assert run.status == "failed"
    assert run.types("t").count("Started") == 3
    assert run.types("t").count("Downloading Artifacts") == 2  # the first start: announcement and progress
    assert server.hits("/app.tar.gz") == 1


def test_an_unsafe_archive_fails_the_task_without_retrying(server: FileServer, data_dir: Path) -> None:
    server.files["/app.tar"] = tar_bytes([("../../escape", b"x")])
    run = run_job(job(server.url("/app.tar"), 0, attempts=3), data_dir)
    assert run.status == "failed"
    assert "Restarting" not in run.types("t") and "Failed Artifact Download" in run.types("t")
    assert not list(data_dir.rglob("escape"))


def test_a_link_planted_on_the_way_is_refused_and_the_start_retried(server: FileServer, data_dir: Path,
                                                                    tmp_path: Path) -> None:
    """A sibling task links the shared destination to a host directory: herder refuses it, names
    it, and retries the start under the restart policy, never writing through the link."""
    host = tmp_path / "host"
    host.mkdir()
    server.files["/app.tar.gz"] = tar_bytes([("bin/run.sh", SCRIPT)], "gz")
    text = f'''
job "j" {{
  type = "batch"
  group "g" {{
    restart {{
      attempts = 1
      delay    = "100ms"
      interval = "1m"
      mode     = "fail"
    }}
    task "plant" {{
      driver = "raw_exec"
      lifecycle {{
        hook = "prestart"
      }}
      config {{
        command = "/bin/ln"
        args    = ["-s", "{host}", "${{NOMAD_ALLOC_DIR}}/data/app"]
      }}
    }}
    task "t" {{
      driver = "raw_exec"
      artifact {{
        source      = "{server.url("/app.tar.gz")}"
        destination = "alloc/data/app"
      }}
      config {{
        command = "/bin/true"
      }}
    }}
  }}
}}
'''
    run = run_job(text, data_dir)
    assert run.status == "failed"
    types = run.types("t")
    assert types.count("Failed Artifact Download") == 2 and "Restarting" in types and "Started" not in types
    failures = [r.event.message for r in run.events if r.task == "t" and r.event.type == "Failed Artifact Download"]
    assert "destination alloc/data/app: alloc/data/app: a link; not followed" in failures[0]
    assert list(host.iterdir()) == []


@pytest.fixture
def git_server(tmp_path: Path) -> Iterator[FileServer]:
    """A git repository of ``bin/run.sh`` served over smart HTTP."""
    repo = Repo(tmp_path / "git")
    repo.commit({"bin/run.sh": SCRIPT.decode()})
    repo.publish()
    yield from serve(git_root=repo.bare.parent)


def test_the_task_runs_what_a_git_artifact_brought(git_server: FileServer, data_dir: Path) -> None:
    run = run_job(job(f"git::{git_server.url('/git/repo.git')}?ref=main&depth=1", 0), data_dir)
    assert run.status == "complete", run.types()
    [*_, progress] = [r.event for r in run.events if r.event.type == "Downloading Artifacts"]
    assert progress.details["progress"]["current"] == progress.details["progress"]["total"] > 0
    [runs] = data_dir.glob("allocs/*/alloc/data/runs")
    assert runs.read_text() == "ran once\n"
