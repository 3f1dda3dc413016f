"""Exec inside a running container through the Docker exec API (script checks, ``herder alloc exec``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from herder import EXEC_OUTPUT_LIMIT
from herder.client.task_runner import TaskRunner

from .helpers import DockerJobs, docker_job, job_name, sh


@pytest.fixture
def running(jobs: DockerJobs) -> Iterator[TaskRunner]:
    """The task runner of a container that sleeps until stopped."""
    run, wait = jobs.start(docker_job(job_name("exec"), sh("echo ready > /local/ready; exec sleep 300"),
                                      kill_timeout="1s"))
    run.wait_for("Started")
    yield run.runner.allocs[0].tasks[0]
    run.runner.stop()
    wait()


def test_exit_code_and_both_streams(running: TaskRunner) -> None:
    result = running.exec(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=5)
    assert result.exit_code == 3
    assert b"out\n" in result.output and b"err\n" in result.output


def test_runs_in_the_container_with_the_task_dirs(running: TaskRunner) -> None:
    (running.ctx.task_dir.local_dir / "from-host").write_text("seen inside\n")
    result = running.exec(["cat", "/local/from-host"], timeout=5)
    assert (result.exit_code, result.output) == (0, b"seen inside\n")


def test_a_command_past_its_timeout_raises(running: TaskRunner) -> None:
    with pytest.raises(TimeoutError):
        running.exec(["sleep", "30"], timeout=1)
    # the container is still there for the next command
    assert running.exec(["true"], timeout=5).exit_code == 0


def test_output_is_capped_at_64_kib(running: TaskRunner) -> None:
    result = running.exec(["head", "-c", "200000", "/dev/zero"], timeout=10)
    assert result.exit_code == 0
    assert len(result.output) == EXEC_OUTPUT_LIMIT == 64 * 1024


def test_a_command_that_does_not_exist(running: TaskRunner) -> None:
    result = running.exec(["/no/such/command"], timeout=5)
    assert result.exit_code != 0
