"""The rkt driver through the command line: ``drivers``, the example (built with its script) serving its page,
and a herder killed with SIGKILL that reattaches to its running pod."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from herder.plugins.loader import load_plugins
from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.require import require
from tests.support.waiting import wait_for

from .helpers import app_pid, listed_pods, mounts_under, rkt_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "rkt" / "web.hcl"
BUILD_SCRIPT = REPO / "examples" / "rkt" / "build-busybox-aci.sh"

Herder = Callable[..., subprocess.CompletedProcess[str]]

COUNTER = """
job "counter" {
  group "g" {
    task "t" {
      driver       = "rkt"
      kill_timeout = "2s"
      config {
        image            = "example.local/busybox:1.0.0"
        insecure_options = ["image"]
        command          = "/bin/sh"
        args             = ["-c", "trap 'exit 0' TERM; i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done"]
      }
    }
  }
}
"""


def with_rkt(config_file: Path, plugin_config: dict[str, Any]) -> Path:
    """Add the ``[plugin.rkt]`` table to herder's configuration file."""
    table = "".join(f"{key} = {json.dumps(value)}\n" for key, value in plugin_config.items())
    config_file.write_text(config_file.read_text() + f"\n[plugin.rkt]\n{table}")
    return config_file


def test_the_example_is_valid(herder: Herder) -> None:
    require("rkt", load_plugins().record("rkt") is not None, "herder-rkt is not installed")
    result = herder("validate", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "Job validation successful: rkt-web (1 tasks)" in result.stdout


def test_drivers_shows_rkt_healthy_with_its_versions(rkt_plugin_config: dict[str, Any], herder: Herder,
                                                     config_file: Path) -> None:
    result = herder("drivers", "--json", "--config", str(with_rkt(config_file, rkt_plugin_config)))
    assert result.returncode == 0, result.stderr
    rkt = {d["name"]: d for d in json.loads(result.stdout)["drivers"]}["rkt"]
    assert rkt["distribution"] == "herder-rkt"
    assert (rkt["detected"], rkt["healthy"]) == (True, True), rkt
    assert rkt["attributes"] == {"driver.rkt.version": "1.30.0", "driver.rkt.appc.version": "0.8.11"}


def test_the_example_serves_its_page_until_interrupted(rkt_plugin_config: dict[str, Any], rkt_store: Path,
                                                       tmp_path: Path, config_file: Path) -> None:
    image = tmp_path / "example.aci"
    built = subprocess.run(["bash", str(BUILD_SCRIPT), str(image)], capture_output=True, text=True, timeout=60,
                           env={"ACI_VERSION": "1.0.0-example", "PATH": "/usr/bin:/bin"})
    assert built.returncode == 0, built.stderr
    rkt = rkt_for(rkt_store)
    image_id = rkt.fetch(str(image), insecure=["image"])
    example = tmp_path / "web.hcl"
    example.write_text(EXAMPLE.read_text().replace("busybox:1.0.0", "busybox:1.0.0-example"))
    run = HerderRun(example, tmp_path / "data", config=with_rkt(config_file, rkt_plugin_config))
    try:
        run.wait_for("Started", timeout=30)
        port_line = re.compile(r"rkt-web\.web\[0\]: port http is ([\d.]+:\d+)")
        address = wait_for(lambda: port_line.search(run.stderr), what=lambda: f"the port line; stderr {run.stderr}")
        assert read_url(f"http://{address[1]}/") == b"hello from rkt-web.web[0]\n"
        assert [pod.state for pod in rkt.pods()] == ["running"]
    finally:
        assert run.interrupt() == 0, run.stderr
    assert listed_pods(rkt) == []
    assert mounts_under(rkt_store) == []
    rkt.image_rm(next(i.id for i in rkt.images() if i.id.startswith(image_id)))


def test_a_killed_herder_reattaches_to_its_running_pod(rkt_plugin_config: dict[str, Any], rkt_store: Path,
                                                       tmp_path: Path, config_file: Path) -> None:
    data_dir, job = tmp_path / "data", tmp_path / "job.hcl"
    job.write_text(COUNTER)
    config = with_rkt(config_file, rkt_plugin_config)
    rkt = rkt_for(rkt_store)
    first = HerderRun(job, data_dir, "--keep", config=config)
    second: HerderRun | None = None
    try:
        first.wait_for("Started", timeout=30)
        # Started comes once rkt wrote the UUID, while it still prepares the pod: wait for the app
        wait_for(lambda: [state for _, state in listed_pods(rkt)] == ["running"],
                 what=lambda: f"the pod running; pods {listed_pods(rkt)}")
        [(uuid, _)] = listed_pods(rkt)
        pid = app_pid(rkt, uuid)
        first.kill()

        # herder is gone: the pod runs on, and its output still reaches the log file
        [log] = (data_dir / "allocs").glob("*/alloc/logs/t.stdout.0")
        size = log.stat().st_size
        wait_for(lambda: log.stat().st_size > size, what="the log growing")
        assert app_pid(rkt, uuid) == pid

        second = HerderRun(job, data_dir, "--keep", config=config)
        second.wait_for("Reattached", timeout=30)
        assert second.of("Started") == [], "the task was started twice"
        assert listed_pods(rkt) == [(uuid, "running")]
        assert app_pid(rkt, uuid) == pid
    finally:
        first.finish(kill=True)  # if the test failed before it was killed
        if second is not None:
            assert second.interrupt() == 0, second.stderr
    assert listed_pods(rkt) == []
    lines = [int(line) for line in log.read_text().split()]
    assert lines == list(range(len(lines))), "a line was lost or repeated"
