"""Containers run through herder: ports, environment, directories, stop, OOM, failures."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.support.http import read_url
from tests.support.waiting import wait_for

from .helpers import (
    IMAGE,
    Docker,
    DockerJobs,
    containers_of,
    docker_job,
    events_of,
    job_name,
    sh,
)

HTTP = [{"label": "http"}]


def test_http_server_reached_on_the_host_port_then_stopped_and_removed(jobs: DockerJobs,
                                                                        docker_client: Docker) -> None:
    script = "echo hello from $NOMAD_ALLOC_NAME > /local/index.html && exec httpd -f -p 8080 -h /local"
    # httpd is the container's PID 1, which ignores SIGTERM: it is killed after kill_timeout
    run, wait = jobs.start(docker_job(job_name("web"), sh(script, port_map={"http": 8080}), ports=HTTP,
                                      kill_timeout="1s"))
    run.wait_for("Started")
    alloc = run.runner.allocs[0]
    port = next(p for p in alloc.ports if p.label == "http")
    assert 2000 <= port.value <= 12000
    body = read_url(f"http://127.0.0.1:{port.value}/index.html")
    assert body == f"hello from {alloc.alloc.name}\n".encode()
    [container] = containers_of(docker_client, alloc.alloc.id)
    assert container.status == "running"

    run.runner.stop()
    assert wait() == "stopped"
    assert run.types("t")[-3:] == ["Killing", "Terminated", "Killed"]
    assert containers_of(docker_client, alloc.alloc.id) == []


def test_port_interpolated_in_args_is_the_container_port(jobs: DockerJobs, docker_client: Docker) -> None:
    """``${NOMAD_PORT_http}`` in the task's config is the port the task listens on: the port_map's (as Nomad)."""
    config = {"image": IMAGE, "command": "httpd", "args": ["-f", "-p", "${NOMAD_PORT_http}", "-h", "/local"],
              "port_map": {"http": 8080}}
    run, wait = jobs.start(docker_job(job_name("interp"), config, ports=HTTP, kill_timeout="1s"))
    (run.runner.allocs[0].tasks[0].ctx.task_dir.local_dir / "index.html").write_text("interpolated\n")
    run.wait_for("Started")
    [container] = containers_of(docker_client, run.runner.allocs[0].alloc.id)
    assert container.attrs["Args"] == ["-f", "-p", "8080", "-h", "/local"]
    port = next(p for p in run.runner.allocs[0].ports if p.label == "http")
    assert read_url(f"http://127.0.0.1:{port.value}/") == b"interpolated\n"
    run.runner.stop()
    wait()


def test_environment_and_task_directories_inside_the_container(jobs: DockerJobs) -> None:
    script = ("env > /local/env.txt; echo from-inside > /local/x; echo shared > /alloc/data/shared;"
              " ls -d /secrets > /local/secrets.txt")
    run = jobs.run(docker_job(job_name("env"), sh(script, port_map={"http": 8080}), type="batch", ports=HTTP))
    assert run.status == "complete", run.types()
    runner = run.runner.allocs[0].tasks[0]
    local = runner.ctx.task_dir.local_dir
    assert (local / "x").read_text() == "from-inside\n"
    assert (runner.ctx.task_dir.alloc_dir / "data" / "shared").read_text() == "shared\n"
    assert (local / "secrets.txt").read_text() == "/secrets\n"
    env = dict(line.split("=", 1) for line in (local / "env.txt").read_text().splitlines() if "=" in line)
    host_port = next(p for p in runner.ctx.ports if p.label == "http").value
    for prefix in ("NOMAD", "HERDER"):
        assert env[f"{prefix}_PORT_http"] == "8080"
        assert env[f"{prefix}_HOST_PORT_http"] == str(host_port)
        assert env[f"{prefix}_ALLOC_DIR"] == "/alloc"
        assert env[f"{prefix}_TASK_DIR"] == "/local"
        assert env[f"{prefix}_SECRETS_DIR"] == "/secrets"
        assert env[f"{prefix}_ALLOC_ID"] == run.runner.allocs[0].alloc.id
        assert env[f"{prefix}_MEMORY_LIMIT"] == "64"


def test_logs_reach_the_rotating_files(jobs: DockerJobs) -> None:
    run = jobs.run(docker_job(job_name("logs"), sh("echo to-out; echo to-err >&2"), type="batch"))
    assert run.status == "complete", run.types()
    logs = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir
    assert (logs / "t.stdout.0").read_bytes() == b"to-out\n"
    assert (logs / "t.stderr.0").read_bytes() == b"to-err\n"


def test_exit_code_is_reported_and_fails_the_task(jobs: DockerJobs, docker_client: Docker) -> None:
    run = jobs.run(docker_job(job_name("exit"), sh("exit 7"), type="batch"))
    assert run.status == "failed"
    [terminated] = events_of(run, "Terminated")
    assert terminated.details["exit_code"] == 7
    assert terminated.details["oom_killed"] is False
    assert run.types("t")[-1] == "Not Restarting"
    assert containers_of(docker_client, run.runner.allocs[0].alloc.id) == []


def test_a_restarted_task_gets_a_fresh_container_and_all_are_removed(jobs: DockerJobs,
                                                                     docker_client: Docker) -> None:
    script = "echo run >> /local/runs; echo run $(wc -l < /local/runs); exit 1"
    run = jobs.run(docker_job(job_name("restart"), sh(script), type="batch", attempts=2))
    assert run.status == "failed"
    assert run.types("t").count("Started") == 3
    assert run.types("t").count("Restarting") == 2
    assert (run.runner.allocs[0].tasks[0].ctx.task_dir.local_dir / "runs").read_text() == "run\n" * 3
    # every run's output in the same log file, in order
    log = run.runner.allocs[0].tasks[0].ctx.task_dir.logs_dir / "t.stdout.0"
    assert log.read_text() == "run 1\nrun 2\nrun 3\n"
    assert containers_of(docker_client, run.runner.allocs[0].alloc.id) == []


@pytest.mark.slow
def test_out_of_memory_is_reported(jobs: DockerJobs) -> None:
    script = 'x=$(head -c 64000000 /dev/zero | tr "\\0" a); echo survived ${#x}'
    run = jobs.run(docker_job(job_name("oom"), sh(script), type="batch", memory=16))
    assert run.status == "failed", run.types()
    [terminated] = events_of(run, "Terminated")
    assert terminated.details["oom_killed"] is True, terminated
    assert "OOM Killed" in terminated.message
    assert run.types("t")[-1] == "Not Restarting"


def test_a_container_ignoring_sigterm_is_killed_after_kill_timeout(jobs: DockerJobs, docker_client: Docker,
                                                                   tmp_path: Path) -> None:
    script = 'trap "" TERM; touch /local/ready; while true; do sleep 0.1; done'
    run, wait = jobs.start(docker_job(job_name("stubborn"), sh(script), kill_timeout="1s"))
    run.wait_for("Started")
    ready = run.runner.allocs[0].tasks[0].ctx.task_dir.local_dir / "ready"
    wait_for(ready.exists, what="the container to install its trap")
    run.runner.stop()
    assert wait() == "stopped"
    assert run.types("t")[-3:] == ["Killing", "Terminated", "Killed"]
    [terminated] = events_of(run, "Terminated")
    assert terminated.details["exit_code"] == 137 or terminated.details["signal"] == signal.SIGKILL, terminated
    assert containers_of(docker_client, run.runner.allocs[0].alloc.id) == []


def test_kill_signal_reaches_the_container(jobs: DockerJobs) -> None:
    script = ('trap "echo got-int > /local/got; exit 0" INT; touch /local/ready;'
              " while true; do sleep 0.1; done")
    run, wait = jobs.start(docker_job(job_name("sigint"), sh(script), kill_signal="SIGINT", kill_timeout="10s"))
    run.wait_for("Started")
    local = run.runner.allocs[0].tasks[0].ctx.task_dir.local_dir
    wait_for((local / "ready").exists, what="the container ready")
    run.runner.stop()
    assert wait() == "stopped"
    assert (local / "got").read_text() == "got-int\n"
    [terminated] = events_of(run, "Terminated")
    assert terminated.details["exit_code"] == 0


def test_the_default_kill_signal_is_sigterm(jobs: DockerJobs) -> None:
    script = ('trap "echo got-term > /local/got; exit 0" TERM; trap "echo got-int > /local/got; exit 0" INT;'
              " touch /local/ready; while true; do sleep 0.1; done")
    run, wait = jobs.start(docker_job(job_name("sigterm"), sh(script), kill_timeout="10s"))
    run.wait_for("Started")
    local = run.runner.allocs[0].tasks[0].ctx.task_dir.local_dir
    wait_for((local / "ready").exists, what="the container ready")
    run.runner.stop()
    assert wait() == "stopped"
    assert (local / "got").read_text() == "got-term\n"


def test_a_registry_out_of_reach_is_retried_by_the_restart_policy(jobs: DockerJobs) -> None:
    # A registry on a closed loopback port: the daemon's pull fails at once and nothing leaves the
    # machine. A registry that is down may come back, so the failure is recoverable (as in Nomad):
    # the start is retried under the restart policy, and fails only when the policy says so.
    image = "127.0.0.1:1/herder-test/no-such-image:1"
    run = jobs.run(docker_job(job_name("noimage"), sh("true", image=image), attempts=1), timeout=60)
    assert run.status == "failed"
    failures = events_of(run, "Driver Failure")
    assert len(failures) == 2, run.types("t")
    assert image in failures[0].message
    assert all(f.details["recoverable"] is True for f in failures)
    assert "Started" not in run.types("t")
    assert "Restarting" in run.types("t")
    [not_restarting] = events_of(run, "Not Restarting")
    assert not_restarting.message.startswith("Exceeded allowed attempts 1")


def test_volumes_are_refused_unless_enabled(jobs: DockerJobs, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    config = sh("cat /data/in > /local/out", volumes=[f"{shared}:/data:ro"])
    (shared / "in").write_text("through a volume\n")

    refused = jobs.run(docker_job(job_name("vol"), config, type="batch"))
    assert refused.status == "failed"
    failure = next(e for e in refused.events if e.event.type == "Driver Failure").event
    assert "volumes_enabled" in failure.message
    assert "Started" not in refused.types("t")

    allowed = jobs.run(docker_job(job_name("vol"), config, type="batch"),
                       plugin={"docker": {"volumes_enabled": True}})
    assert allowed.status == "complete", allowed.types()
    local = allowed.runner.allocs[0].tasks[0].ctx.task_dir.local_dir
    assert (local / "out").read_text() == "through a volume\n"


def test_a_relative_volume_path_is_in_the_task_dir(jobs: DockerJobs, docker_client: Docker) -> None:
    """As in Nomad: a relative host path is taken relative to the task directory, never a named volume."""
    name = job_name("relvol")
    run = jobs.run(docker_job(name, sh("echo hi > /data/f", volumes=[f"{name}:/data"]), type="batch"),
                   plugin={"docker": {"volumes_enabled": True}})
    leaked = [v for v in docker_client.volumes.list() if v.name == name]
    for volume in leaked:
        volume.remove(force=True)
    assert run.status == "complete", run.types()
    assert leaked == [], f"a Docker named volume {name!r} was created (and left behind)"
    assert (run.runner.allocs[0].tasks[0].ctx.task_dir.dir / name / "f").read_text() == "hi\n"


def test_labels_are_set_on_the_container(jobs: DockerJobs, docker_client: Docker) -> None:
    run, wait = jobs.start(docker_job(job_name("labels"), sh("sleep 300", labels={"team": "herder-tests"}),
                                      kill_timeout="1s"))
    run.wait_for("Started")
    alloc_id = run.runner.allocs[0].alloc.id
    [container] = containers_of(docker_client, alloc_id)
    assert container.labels["team"] == "herder-tests"
    assert container.labels["herder.alloc_id"] == alloc_id
    assert container.attrs["HostConfig"]["Memory"] == 64 * 1024 * 1024
    run.runner.stop()
    assert wait() == "stopped"


def test_an_error_answer_of_the_daemon_is_final_not_retried(jobs: DockerJobs) -> None:
    """A 400 (here: a working directory Docker refuses) is the daemon's answer, not the daemon out of
    reach: the task fails at once, whatever the restart policy allows."""
    run = jobs.run(docker_job(job_name("bad-workdir"), sh("true", work_dir="relative/dir"), type="batch",
                              attempts=3))
    assert run.status == "failed"
    [failure] = events_of(run, "Driver Failure")
    assert failure.details["recoverable"] is False, failure
    assert "needs to be an absolute path" in failure.message and "unreachable" not in failure.message
    assert "Restarting" not in run.types("t")
    assert events_of(run, "Not Restarting")[0].message == "Error was unrecoverable"


def test_reserved_cores_pin_each_allocation_to_cores_of_its_own(jobs: DockerJobs) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs to reserve one apart from another")
    job = docker_job(job_name("cores"), sh("grep Cpus_allowed_list /proc/self/status > /local/cpus"),
                     type="batch", count=2)
    resources = job["job"]["groups"][0]["tasks"][0]["resources"]
    del resources["cpu"]  # cores replace cpu, as in Nomad
    resources["cores"] = 1
    run = jobs.run(job)
    assert run.status == "complete", run.types()
    pinned = []
    for alloc in run.runner.allocs:
        ctx = alloc.tasks[0].ctx
        (core,) = ctx.cores
        assert (ctx.task_dir.local_dir / "cpus").read_text().split() == ["Cpus_allowed_list:", str(core)]
        pinned.append(core)
    assert len(set(pinned)) == 2
