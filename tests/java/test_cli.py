"""The java driver through the command line: ``drivers``, the example, and a JVM that outlives a herder
killed with SIGKILL, is reattached by the next one, and runs its shutdown hooks when that one stops it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from herder_java.version import parse_version

from tests.support.foreground import HerderRun
from tests.support.http import read_url
from tests.support.require import require
from tests.support.waiting import wait_for

from .helpers import JAR

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "java-hello"
PORT_LINE = re.compile(r"port http is ([\d.]+:\d+)")

Herder = Callable[..., subprocess.CompletedProcess[str]]

SERVER = f"""
job "java-server" {{
  group "g" {{
    task "t" {{
      driver       = "java"
      kill_timeout = "10s"
      config {{
        jar_path = "{JAR}"
        args     = ["serve", "${{NOMAD_PORT_http}}"]
      }}
      resources {{
        memory = 128
        network {{
          port "http" {{}}
        }}
      }}
    }}
  }}
}}
"""


def drivers_json(herder: Herder, config_file: Path) -> dict[str, Any]:
    result = herder("drivers", "--json", "--config", str(config_file))
    assert result.returncode == 0, result.stderr
    return {d["name"]: d for d in json.loads(result.stdout)["drivers"]}


def with_plugin_table(config_file: Path, table: str) -> Path:
    config_file.write_text(config_file.read_text() + f"\n[plugin.java]\n{table}\n")
    return config_file


def address(run: HerderRun) -> str:
    found = wait_for(lambda: PORT_LINE.search(run.stderr), what=lambda: f"the port line; stderr {run.stderr}")
    return found[1]


def test_drivers_shows_the_jvms_version_runtime_and_vm(java_driver: str, herder: Herder, config_file: Path) -> None:
    java = drivers_json(herder, config_file)["java"]
    assert java["distribution"] == "herder-java"
    assert (java["detected"], java["healthy"]) == (True, True), java
    real = subprocess.run([shutil.which("java") or "java", "-version"], capture_output=True, text=True, timeout=60)
    assert {key: java["attributes"][key] for key in parse_version(real.stderr).attributes()} == \
        parse_version(real.stderr).attributes()
    assert java["attributes"]["driver.java.isolation"] in ("exec", "none")


def test_without_a_jvm_the_driver_is_not_detected(java_driver: str, herder: Herder, config_file: Path) -> None:
    java = drivers_json(herder, with_plugin_table(config_file, 'java = "/nonexistent/java"'))["java"]
    assert (java["detected"], java["healthy"]) == (False, False)
    assert java["description"] == "java not found: /nonexistent/java"


def test_the_example_serves_until_interrupted_and_says_goodbye(java_driver: str, tmp_path: Path,
                                                               config_file: Path) -> None:
    jar = _build_example(tmp_path)
    run = HerderRun(EXAMPLE / "hello.hcl", tmp_path / "data", "--var", f"jar={jar}", config=config_file)
    try:
        [started] = [event for event in run.wait_for("Started", 2, timeout=60) if event["task"] == "hello"]
        body = read_url(f"http://{address(run)}/", timeout=30).decode()
        user = "nobody" if started["details"]["isolation"] == "exec" else "root"
        assert re.fullmatch(rf"hello from {user} in java-hello\.web\[0\] on Java \S+\n", body), body
    finally:
        assert run.interrupt() == 0, run.stderr
    [log] = (tmp_path / "data" / "allocs").glob("*/alloc/logs/hello.stdout.0")
    assert log.read_text().splitlines()[-1] == "goodbye"


@pytest.mark.slow
@pytest.mark.parametrize("isolation", ["none", "exec"])
def test_a_killed_herder_reattaches_to_its_running_jvm(java_driver: str, java_app: None, tmp_path: Path,
                                                       config_file: Path, isolation: str,
                                                       request: pytest.FixtureRequest) -> None:
    if isolation == "exec":
        request.getfixturevalue("isolated")
    config = with_plugin_table(config_file, f'isolation = "{isolation}"')
    data_dir, job = tmp_path / "data", tmp_path / "job.hcl"
    job.write_text(SERVER)
    first = HerderRun(job, data_dir, "--keep", config=config)
    [started] = first.wait_for("Started", timeout=60)
    assert started["details"] == {"isolation": isolation, "description": started["details"]["description"]}
    url = f"http://{address(first)}/"
    greeting = read_url(url, timeout=30)
    first.kill()

    assert read_url(url) == greeting  # herder is gone: the JVM serves on
    second = HerderRun(job, data_dir, "--keep", config=config)
    try:
        second.wait_for("Reattached", timeout=60)
        assert second.of("Started") == [], "the task was started twice"
        assert read_url(url) == greeting
    finally:
        assert second.interrupt() == 0, second.stderr
    [log] = (data_dir / "allocs").glob("*/alloc/logs/t.stdout.0")
    assert log.read_text().splitlines()[-1] == "shutdown hook ran"


def _build_example(where: Path) -> Path:
    """examples/java-hello/Hello.java compiled and packed as build.sh does, into ``where``."""
    javac, jar = shutil.which("javac"), shutil.which("jar")
    require("java", bool(javac and jar), "no JDK here: javac or jar is missing")
    assert javac and jar
    subprocess.run([javac, "-d", str(where / "classes"), str(EXAMPLE / "Hello.java")], check=True, timeout=120)
    subprocess.run([jar, "--create", "--file", str(where / "hello.jar"), "--main-class", "Hello",
                    "-C", str(where / "classes"), "."], check=True, timeout=120)
    (where / "hello.jar").chmod(0o644)
    return where / "hello.jar"


def test_a_missing_jar_fails_the_task_naming_the_path(java_driver: str, herder: Herder, tmp_path: Path,
                                                      config_file: Path) -> None:
    job = tmp_path / "job.hcl"
    job.write_text('job "missing" {\n type = "batch"\n group "g" {\n restart {\n attempts = 0\n mode = "fail"\n }\n'
                   ' task "t" {\n driver = "java"\n config {\n jar_path = "local/missing.jar"\n }\n }\n }\n}\n')
    result = herder("run", "--config", str(config_file), str(job))
    assert result.returncode == 1, result.stderr
    assert "Driver Failure" in result.stdout + result.stderr
    assert "job.group[g].task[t].config.jar_path: local/missing.jar does not exist in the task directory" in \
        result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_validate_names_the_key_at_fault(java_driver: str, herder: Herder, tmp_path: Path) -> None:
    job = tmp_path / "job.hcl"
    job.write_text('job "both" {\n group "g" {\n task "t" {\n driver = "java"\n config {\n'
                   ' jar_path = "local/a.jar"\n class = "Main"\n }\n }\n }\n}\n')
    result = herder("validate", str(job))
    assert result.returncode == 2, result.stdout
    assert "job.groups[0].tasks[0].config.jar_path: cannot be given with class" in result.stdout + result.stderr
