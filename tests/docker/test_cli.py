"""The docker driver through the command line: ``drivers``, ``validate``, ``run``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from herder.plugins.loader import load_plugins
from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.require import require
from tests.support.waiting import wait_for

from .helpers import Docker, container_ids, containers_of

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "docker-web.hcl"

Herder = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def docker_installed() -> None:
    """The docker driver loads (whether or not a daemon is there)."""
    record = load_plugins().record("docker")
    require("docker", record is not None and not record.error,
            f"the docker driver is not installed or did not load: {record.error if record else 'no entry point'}")


def drivers_json(herder: Herder, config_file: Path) -> dict[str, Any]:
    result = herder("drivers", "--json", "--config", str(config_file))
    assert result.returncode == 0, result.stderr
    return {d["name"]: d for d in json.loads(result.stdout)["drivers"]}


def test_drivers_without_a_daemon_says_why(docker_installed: None, herder: Herder, config_file: Path) -> None:
    config_file.write_text(config_file.read_text() + '\n[plugin.docker]\nendpoint = "unix:///nonexistent.sock"\n')
    docker = drivers_json(herder, config_file)["docker"]
    assert docker["distribution"] == "herder-docker"
    assert docker["detected"] is False and docker["healthy"] is False
    assert "unix:///nonexistent.sock" in docker["description"]


def test_run_without_a_daemon_fails_placement_naming_the_driver(docker_installed: None, herder: Herder,
                                                                 config_file: Path) -> None:
    config_file.write_text(config_file.read_text() + '\n[plugin.docker]\nendpoint = "unix:///nonexistent.sock"\n')
    result = herder("run", "--config", str(config_file), str(EXAMPLE))
    assert result.returncode == 1
    assert "docker" in result.stderr and "unix:///nonexistent.sock" in result.stderr
    assert "Traceback" not in result.stderr


def test_drivers_with_the_daemon(docker_driver: str, docker_client: Docker, herder: Herder,
                                 config_file: Path) -> None:
    docker = drivers_json(herder, config_file)["docker"]
    assert (docker["detected"], docker["healthy"]) == (True, True)
    attributes = docker["attributes"]
    assert attributes["driver.docker.version"] == docker_client.version()["Version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", attributes.get("driver.docker.bridge_ip", "")), attributes


def write_job(tmp_path: Path, config: str) -> Path:
    job = tmp_path / "job.hcl"
    job.write_text(f'job "j" {{\n group "g" {{\n task "t" {{\n driver = "docker"\n config {{\n{config}\n }}\n'
                   ' resources {\n network {\n port "http" {}\n }\n }\n }\n }\n}\n')
    return job


@pytest.mark.parametrize(("config", "path", "words"), [
    ('image = "herder-test/busybox:1"\n port_map {\n http = "x"\n }',
     "job.groups[0].tasks[0].config.port_map.http", []),
    ('image = "herder-test/busybox:1"\n port_map {\n http = 70000\n }',
     "job.groups[0].tasks[0].config.port_map.http", []),
    ('image = "herder-test/busybox:1"\n no_such_option = true', "job.groups[0].tasks[0].config.no_such_option",
     ["unknown key"]),
    ('command = "sh"', "job.groups[0].tasks[0].config.image", ["required"]),
    ('image = "herder-test/busybox:1"\n volumes = ["no-colon"]', "job.groups[0].tasks[0].config.volumes[0]", []),
])
def test_validate_names_the_config_path(docker_installed: None, herder: Herder, tmp_path: Path, config: str,
                                        path: str, words: list[str]) -> None:
    result = herder("validate", str(write_job(tmp_path, config)))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{path}:" in result.stderr
    for word in words:
        assert word in result.stderr
    assert "Traceback" not in result.stderr


def test_the_example_is_valid(docker_installed: None, herder: Herder) -> None:
    result = herder("validate", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "Job validation successful" in result.stdout


def test_volumes_refused_by_run(docker_driver: str, busybox_image: str, herder: Herder, tmp_path: Path,
                                config_file: Path) -> None:
    job = write_job(tmp_path, f'image = "{busybox_image}"\n command = "true"\n volumes = ["/etc:/host-etc:ro"]')
    result = herder("run", "--config", str(config_file), str(job))
    assert result.returncode == 1
    assert "volumes_enabled" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_the_example_serves_its_page_until_interrupted(docker_driver: str, busybox_image: str,
                                                       docker_client: Docker, config_file: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "herder", "run", "--json", "--config", str(config_file),
                             str(EXAMPLE)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    alloc_id = ""
    try:
        assert proc.stderr is not None and proc.stdout is not None
        line = proc.stderr.readline()
        match = re.search(r"docker-web\.app\[0\]: port http is ([\d.]+):(\d+)", line)
        assert match, line
        first = json.loads(proc.stdout.readline())
        alloc_id = first["alloc_id"]
        body = read_url(f"http://{match[1]}:{match[2]}/")
        assert body == b"hello from docker-web.app[0]\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        for container in containers_of(docker_client, alloc_id) if alloc_id else []:
            container.remove(force=True)
    assert proc.returncode == 0, err
    *events, last = (json.loads(line) for line in out.splitlines())
    assert [e["type"] for e in events][-3:] == ["Killing", "Terminated", "Killed"]
    assert last["summary"]["status"] == "stopped"
    assert containers_of(docker_client, alloc_id) == []


def test_a_relative_data_dir_works(docker_driver: str, busybox_image: str, herder: Herder, tmp_path: Path,
                                   config_file: Path) -> None:
    """The task dirs reach Docker as absolute bind sources, not as (relative) volume names."""
    job = write_job(tmp_path, f'image = "{busybox_image}"\n command = "sh"\n args = ["-c", "echo hi > /local/out"]')
    job.write_text(job.read_text().replace('job "j" {', 'job "j" {\n type = "batch"'))
    config_file.write_text("[ports]\nmin = 2000\nmax = 12000\n")
    result = herder("run", "--config", str(config_file), "--data-dir", "rel-data", str(job), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [out] = (tmp_path / "rel-data").glob("allocs/*/t/local/out")
    assert out.read_text() == "hi\n"


def test_a_killed_run_has_its_container_removed(docker_driver: str, busybox_image: str, docker_client: Docker,
                                                tmp_path: Path, config_file: Path) -> None:
    """herder dies with SIGKILL: the supervisor runs ``herder reap``, which stops and removes the container."""
    job = write_job(tmp_path, f'image = "{busybox_image}"\n command = "sleep"\n args = ["300"]')
    run = HerderRun(job, tmp_path / "data", config=config_file)
    [started] = run.wait_for("Started")
    assert containers_of(docker_client, started["alloc_id"])
    run.kill()
    wait_for(lambda: not container_ids(docker_client, started["alloc_id"]),
             what=lambda: f"the container removed; left {container_ids(docker_client, started['alloc_id'])}",
             interval=0.2)


def test_a_kept_container_is_reattached_by_the_next_run(docker_driver: str, busybox_image: str,
                                                        docker_client: Docker, tmp_path: Path,
                                                        config_file: Path) -> None:
    job = write_job(tmp_path, f'image = "{busybox_image}"\n command = "sleep"\n args = ["300"]')
    first = HerderRun(job, tmp_path / "data", "--keep", config=config_file)
    [started] = first.wait_for("Started")
    [container] = containers_of(docker_client, started["alloc_id"])
    first.kill()
    second = HerderRun(job, tmp_path / "data", "--keep", config=config_file)
    second.wait_for("Reattached")
    assert second.of("Started") == []
    assert [c.id for c in containers_of(docker_client, started["alloc_id"])] == [container.id]
    assert second.interrupt() == 0, second.stderr
    assert containers_of(docker_client, started["alloc_id"]) == []


def test_a_reattached_container_continues_its_log(docker_driver: str, busybox_image: str, docker_client: Docker,
                                                  tmp_path: Path, config_file: Path) -> None:
    """The next run copies what the container writes from then on into the same files: nothing twice."""
    count = 'i=0; while :; do i=$((i+1)); echo $i; sleep 0.01; done'
    job = write_job(tmp_path, f'image = "{busybox_image}"\n command = "sh"\n args = ["-c", "{count}"]')
    data_dir = tmp_path / "data"
    first = HerderRun(job, data_dir, "--keep", config=config_file)
    [started] = first.wait_for("Started")
    logs = data_dir / "allocs" / started["alloc_id"] / "alloc" / "logs"

    def numbers() -> list[int]:
        return [int(line) for line in (logs / "t.stdout.0").read_text().split()]

    wait_for(lambda: len(numbers()) >= 20, 30, "the first run to copy 20 lines")
    first.kill()
    before = numbers()
    second = HerderRun(job, data_dir, "--keep", config=config_file)
    second.wait_for("Reattached")
    wait_for(lambda: len(numbers()) >= len(before) + 20, 30, "the second run to copy 20 more lines")
    assert second.interrupt() == 0, second.stderr
    after = numbers()
    assert after[: len(before)] == before == list(range(1, len(before) + 1))
    resumed = after[len(before):]
    assert resumed == list(range(resumed[0], resumed[0] + len(resumed)))  # whole lines, in order, from the reattach
    assert resumed[0] > before[-1]  # none copied twice
    assert containers_of(docker_client, started["alloc_id"]) == []
