"""The exec driver through the command line: ``drivers``, ``run`` (the example, placement without runc),
and a herder killed with SIGKILL that reattaches to its running containers."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.waiting import wait_for

from .helpers import containers_under, runc

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "exec-web.hcl"

Herder = Callable[..., subprocess.CompletedProcess[str]]

SLEEPER = """
job "sleeper" {
  group "g" {
    task "t" {
      driver       = "exec"
      kill_timeout = "2s"
      config {
        command = "/bin/sh"
        args    = ["-c", "trap 'exit 0' INT; i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done"]
      }
    }
  }
}
"""


def drivers_json(herder: Herder, config_file: Path) -> dict[str, Any]:
    result = herder("drivers", "--json", "--config", str(config_file))
    assert result.returncode == 0, result.stderr
    return {d["name"]: d for d in json.loads(result.stdout)["drivers"]}


def without_runc(config_file: Path) -> Path:
    config_file.write_text(config_file.read_text() + '\n[plugin.exec]\nrunc = "/nonexistent/runc"\n')
    return config_file


def test_drivers_shows_exec_healthy_with_its_attributes(exec_driver: str, herder: Herder, config_file: Path) -> None:
    exec_ = drivers_json(herder, config_file)["exec"]
    assert exec_["distribution"] == "herder-exec"
    assert (exec_["detected"], exec_["healthy"]) == (True, True), exec_
    assert re.match(r"\d+\.\d+", exec_["attributes"]["driver.exec.runc.version"])
    assert exec_["attributes"]["driver.exec.cgroup.version"] in ("1", "2")


def test_without_runc_the_fingerprint_says_so(exec_driver: str, herder: Herder, config_file: Path) -> None:
    exec_ = drivers_json(herder, without_runc(config_file))["exec"]
    assert (exec_["detected"], exec_["healthy"]) == (False, False)
    assert "runc not found: /nonexistent/runc" in exec_["description"]


def test_without_runc_a_job_fails_placement_saying_why(exec_driver: str, herder: Herder, config_file: Path) -> None:
    result = herder("run", "--config", str(without_runc(config_file)), str(EXAMPLE))
    assert result.returncode == 1
    assert "exec" in result.stderr and "runc not found: /nonexistent/runc" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_the_example_serves_as_nobody_until_interrupted(exec_driver: str, tmp_path: Path, config_file: Path) -> None:
    run = HerderRun(EXAMPLE, tmp_path / "data", config=config_file)
    try:
        run.wait_for("Started", timeout=30)
        port_line = re.compile(r"exec-web\.web\[0\]: port http is ([\d.]+:\d+)")
        address = wait_for(lambda: port_line.search(run.stderr), what=lambda: f"the port line; stderr {run.stderr}")
        assert read_url(f"http://{address[1]}/") == b"hello from nobody in exec-web.web[0]\n"
        assert containers_under(tmp_path)
    finally:
        assert run.interrupt() == 0, run.stderr
    assert containers_under(tmp_path) == []


def test_a_killed_herder_reattaches_to_its_running_container(exec_driver: str, tmp_path: Path) -> None:
    data_dir, job = tmp_path / "data", tmp_path / "job.hcl"
    job.write_text(SLEEPER)
    first = HerderRun(job, data_dir, "--keep")
    first.wait_for("Started", timeout=30)
    wait_for(lambda: len(containers_under(tmp_path)) == 1,
             what=lambda: f"one container, not {containers_under(tmp_path)}")
    [container] = containers_under(tmp_path)
    init = _init(container)
    first.kill()

    # herder is gone: the container runs on, and its output still reaches the log file
    [log] = (data_dir / "allocs").glob("*/alloc/logs/t.stdout.0")
    size = log.stat().st_size
    wait_for(lambda: log.stat().st_size > size, what="the log growing")
    assert _init(container) == init

    second = HerderRun(job, data_dir, "--keep")
    try:
        second.wait_for("Reattached", timeout=30)
        assert second.of("Started") == [], "the task was started twice"
        assert _init(container) == init
    finally:
        assert second.interrupt() == 0, second.stderr
    assert containers_under(tmp_path) == []
    lines = [int(line) for line in log.read_text().split()]
    assert lines == list(range(len(lines))), "a line was lost or repeated"


def _init(container: str) -> int:
    """The host pid of the container's init."""
    state = runc().state(container)
    assert state is not None and state["status"] == "running", state
    return int(state["pid"])
