"""A container's output in herder's rotating log files: every byte, in order, across rotations."""

from __future__ import annotations

import io
from pathlib import Path

from herder_docker.handle import LOG_DRIVER, ContainerOutput

from herder.supervisor.logfiles import log_files

from .helpers import Docker, DockerJobs, docker, docker_job, job_name, sh

LINES = 700_000
"""``seq 1 700000`` writes 4.8 MB: five files of 1 MB."""


def numbered(first: int, last: int) -> bytes:
    return b"".join(b"%d\n" % n for n in range(first, last + 1))


def read_all(logs: Path, stream: str) -> bytes:
    return b"".join(path.read_bytes() for path in log_files(logs, "t", stream))


def test_megabytes_of_output_are_kept_whole_across_rotations(jobs: DockerJobs) -> None:
    script = f"seq 1 {LINES}; seq 1 {LINES} >&2"
    run = jobs.run(docker_job(job_name("bulk"), sh(script), type="batch",
                              logs={"max_files": 10, "max_file_size": 1}), timeout=120)
    assert run.status == "complete", run.types()
    logs = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir
    expected = numbered(1, LINES)
    for stream in ("stdout", "stderr"):
        files = log_files(logs, "t", stream)
        assert len(files) == 5, files
        content = read_all(logs, stream)
        assert len(content) == len(expected), (stream, len(content), len(expected))
        assert content == expected, stream


def test_output_after_a_silence_longer_than_the_client_timeout_is_kept(docker_client: Docker,
                                                                       busybox_image: str) -> None:
    """The stream waits for the container however long it is silent: no read timeout ends it."""
    quick = docker.from_env(timeout=1)  # the daemon the fixture reached
    container = docker_client.api.create_container(
        busybox_image, ["sh", "-c", "echo before; sleep 3; echo after; echo err >&2"],
        host_config=docker_client.api.create_host_config(log_config=LOG_DRIVER))["Id"]
    try:
        stdout, stderr = io.BytesIO(), io.BytesIO()
        output = ContainerOutput(quick, container, stdout, stderr)
        docker_client.api.start(container)
        output.join(60)
        assert stdout.getvalue() == b"before\nafter\n"
        assert stderr.getvalue() == b"err\n"
    finally:
        docker_client.api.remove_container(container, force=True)
        quick.close()
