"""A task must never make herder (root) write, create or read a file of the host through its log directory.

The attack: root in a container plants ``/alloc/logs/<task>.stdout.N`` (the
shared alloc dir, which every task sees read-write) as symbolic links to a
path of the host, then writes enough to make herder rotate into them; and a
link named as a log file to a secret of the host, for the log reader to
serve.
"""

from __future__ import annotations

from pathlib import Path

from herder import events
from herder.client.logtail import LogTail
from tests.docker.conftest import busybox_image, docker_client, docker_driver, jobs  # noqa: F401 (fixtures)
from tests.docker.helpers import DockerJobs, docker_job, events_of, job_name, sh

LINE = 1000
LINES = 2200
"""About 2 MiB in all: enough to rotate past every planted name at 1 MiB a file (in long lines: Docker's
log stream is slow with many short ones)."""


def test_planted_log_links_are_never_followed(jobs: DockerJobs, busybox_image: str, tmp_path: Path) -> None:  # noqa: F811
    host = tmp_path / "host"
    host.mkdir()
    target = host / "created-by-herder"  # the container cannot see it: only herder could make it
    secret = host / "secret"
    secret.write_text("the host's secret\n")
    script = (
        f"for n in 0 1 2 3; do ln -s {target} /alloc/logs/t.stdout.$n; done; "
        f"ln -s {secret} /alloc/logs/t.stderr.0; "
        f"pad=$(head -c {LINE - 8} /dev/zero | tr '\\0' x); "
        f"i=0; while [ $i -lt {LINES} ]; do printf '%06d %s\\n' $i $pad; i=$((i + 1)); done"
    )
    job = docker_job(job_name("log-links"), sh(script), type="batch",
                     logs={"max_files": 5, "max_file_size": 1})
    run = jobs.run(job, timeout=120)

    assert not target.exists()
    assert secret.read_text() == "the host's secret\n"
    assert run.status == "complete", run.types()
    logs = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir
    expected = b"".join(b"%06d %s\n" % (n, b"x" * (LINE - 8)) for n in range(LINES))
    stdout = LogTail(logs, "t", "stdout")
    assert stdout.read(len(expected) + 1) == expected  # every line, in real files
    assert not any(path.is_symlink() for path in logs.glob("t.stdout.*"))
    told = [event.message for event in events_of(run, events.UNSAFE_LOG_FILE)]
    assert len(told) == 4 and all("was a symbolic link" in message for message in told), told
    # The link the log reader would meet is taken for a missing file, never read.
    assert LogTail(logs, "t", "stderr").read() == b""
