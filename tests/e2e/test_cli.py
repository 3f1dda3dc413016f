"""The command line, end to end, in subprocesses: exit codes, output shapes, signals."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.http import read_url

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CORPUS = REPO / "tests" / "core" / "jobspec" / "malformed"
EXPECTED = tomllib.loads((CORPUS / "expected.toml").read_text())

Herder = Callable[..., subprocess.CompletedProcess[str]]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_rejects_each_malformed_file_naming_the_path(name: str, herder: Herder) -> None:
    result = herder("validate", str(CORPUS / name))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for path in EXPECTED[name]["paths"]:
        assert f"{path}:" in result.stderr


@pytest.mark.parametrize("example", ["hello.hcl", "web.hcl", "sidecar.hcl", "counter.yaml", "bridge-web.hcl",
                                     "countdash.nomad"])
def test_the_examples_are_valid(example: str, herder: Herder) -> None:
    result = herder("validate", str(EXAMPLES / example))
    assert result.returncode == 0, result.stderr
    assert "Job validation successful" in result.stdout


def test_validate_a_missing_file(herder: Herder, tmp_path: Path) -> None:
    result = herder("validate", str(tmp_path / "nope.hcl"))
    assert result.returncode == 2 and "nope.hcl" in result.stderr and "Traceback" not in result.stderr


def test_unknown_driver_is_invalid_input(herder: Herder, tmp_path: Path) -> None:
    job = tmp_path / "j.hcl"
    job.write_text('job "j" {\n group "g" {\n task "t" {\n driver = "warp"\n config {}\n }\n }\n}\n')
    result = herder("run", str(job), "--data-dir", str(tmp_path / "data"))
    assert result.returncode == 2
    assert "job.groups[0].tasks[0].driver" in result.stderr and "warp" in result.stderr


def test_driver_config_errors_name_the_path(herder: Herder, tmp_path: Path) -> None:
    job = tmp_path / "j.hcl"
    job.write_text('job "j" {\n group "g" {\n task "t" {\n driver = "raw_exec"\n config {\n'
                   ' command = "true"\n args = "not a list"\n }\n }\n }\n}\n')
    result = herder("validate", str(job))
    assert result.returncode == 2
    assert "job.groups[0].tasks[0].config.args" in result.stderr


def test_make_run_prints_the_greeting(herder: Herder, config_file: Path) -> None:
    result = herder("run", "--logs", "--config", str(config_file), str(EXAMPLES / "hello.hcl"))
    assert result.returncode == 0, result.stderr
    assert "hello.greeter[0] hello | Hello, hello from task hello of hello.greeter[0]" in result.stdout


def test_run_json_lines(herder: Herder, config_file: Path) -> None:
    result = herder("run", "--json", "--config", str(config_file), str(EXAMPLES / "counter.yaml"))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    *events, last = lines
    assert set(events[0]) == {"time", "alloc_id", "alloc_name", "task", "type", "message", "details"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z", events[0]["time"])
    assert {e["alloc_name"] for e in events} == {"counter.count[0]", "counter.count[1]", "counter.count[2]"}
    summary = last["summary"]
    assert summary["status"] == "complete"
    assert len(summary["allocs"]) == 3
    for alloc_id, alloc in summary["allocs"].items():
        assert alloc["tasks"]["count"] == {"state": "dead", "failed": False, "restarts": 0, "exit_code": 0,
                                                  "checks": []}
        assert any(e["alloc_id"] == alloc_id for e in events)


def test_a_failing_task_exits_1(herder: Herder, tmp_path: Path, config_file: Path) -> None:
    job = tmp_path / "fail.yaml"
    job.write_text("job:\n  name: f\n  type: batch\n  groups:\n    - name: g\n      restart: {attempts: 0}\n"
                   "      tasks:\n        - {name: t, driver: raw_exec, config: {command: /bin/false}}\n")
    result = herder("run", "--config", str(config_file), str(job))
    assert result.returncode == 1
    assert "Not Restarting" in result.stdout


def test_a_taken_static_port_exits_1_naming_the_port(herder: Herder, tmp_path: Path, config_file: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        job = tmp_path / "static.hcl"
        job.write_text(f'job "s" {{\n group "g" {{\n task "t" {{\n driver = "raw_exec"\n config {{\n'
                       f' command = "true"\n }}\n resources {{\n network {{\n port "admin" {{\n static = {port}\n'
                       f' }}\n }}\n }}\n }}\n }}\n}}\n')
        result = herder("run", "--config", str(config_file), str(job))
    assert result.returncode == 1
    assert str(port) in result.stderr and "admin" in result.stderr


def test_a_placement_failure_still_ends_with_the_json_summary(herder: Herder, tmp_path: Path,
                                                             config_file: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        job = tmp_path / "static.hcl"
        job.write_text(f'job "s" {{\n group "g" {{\n task "t" {{\n driver = "raw_exec"\n config {{\n'
                       f' command = "true"\n }}\n resources {{\n network {{\n port "admin" {{\n static = {port}\n'
                       f' }}\n }}\n }}\n }}\n }}\n}}\n')
        result = herder("run", "--json", "--config", str(config_file), str(job))
    assert result.returncode == 1
    assert json.loads(result.stdout.splitlines()[-1]) == {"summary": {"status": "failed", "allocs": {}}}


def test_a_disabled_driver_is_said_to_be_disabled(herder: Herder, tmp_path: Path) -> None:
    job = tmp_path / "j.hcl"
    job.write_text('job "j" {\n group "g" {\n task "t" {\n driver = "raw_exec"\n config {\n command = "true"\n'
                   ' }\n }\n }\n}\n')
    result = herder("validate", "--disable-plugin", "raw_exec", str(job))
    assert result.returncode == 2
    assert "job.groups[0].tasks[0].driver: driver 'raw_exec' is disabled" in result.stderr


def test_a_plugin_that_failed_to_load_is_warned_about_once(install: Callable[..., Path], herder: Herder,
                                                           config_file: Path) -> None:
    install("herder-broken", "6.6.6", {"herder.plugins": {"broken": "broken_import:Plugin"}},
            {"broken_import.py": "import no_such_module_anywhere\n"})
    result = herder("run", "--config", str(config_file), str(EXAMPLES / "hello.hcl"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("plugin broken (herder-broken 6.6.6) was not loaded") == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_web_serves_on_its_port_until_interrupted(sig: signal.Signals, config_file: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "herder", "run", "--config", str(config_file),
                             str(EXAMPLES / "web.hcl")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        seen = [proc.stderr.readline()]  # warnings, if any, come before the ports
        while not (match := re.search(r"port http is ([\d.]+):(\d+)", seen[-1])) and seen[-1]:
            seen.append(proc.stderr.readline())
        assert match, seen
        assert b"Directory listing" in read_url(f"http://{match[1]}:{match[2]}/")
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Killing" in out and "Killed" in out
    assert "Job web: stopped" in err


def test_third_party_plugin_takes_part_in_a_run(install: Callable[..., Path], herder: Herder, tmp_path: Path,
                                                config_file: Path) -> None:
    source = (EXAMPLES / "plugin" / "src" / "herder_eventlog.py").read_text()
    install("herder-eventlog", "0.1.0", {"herder.plugins": {"eventlog": "herder_eventlog:EventLog"}},
            {"herder_eventlog.py": source})
    events = tmp_path / "events.jsonl"
    config_file.write_text(config_file.read_text() + f'\n[plugin.eventlog]\npath = "{events}"\n')
    listing = json.loads(herder("plugins", "--json", "--config", str(config_file)).stdout)["plugins"]
    assert {"name": "eventlog", "distribution": "herder-eventlog", "version": "0.1.0", "status": "loaded"} \
        .items() <= next(p for p in listing if p["name"] == "eventlog").items()
    result = herder("run", "--config", str(config_file), str(EXAMPLES / "hello.hcl"))
    assert result.returncode == 0, result.stderr
    types = [json.loads(line)["type"] for line in events.read_text().splitlines()]
    assert types == ["Received", "Task Setup", "Started", "Terminated", "Not Restarting"]


def test_var_sets_a_job_variable(herder: Herder, tmp_path: Path, config_file: Path) -> None:
    job = tmp_path / "vars.hcl"
    job.write_text('variable "who" {\n default = "nobody"\n}\njob "v" {\n type = "batch"\n group "g" {\n'
                   ' task "t" {\n driver = "raw_exec"\n config {\n command = "/bin/echo"\n'
                   ' args = ["hi ${var.who}"]\n }\n }\n }\n}\n')
    result = herder("run", "--logs", "--var", "who=herder", "--config", str(config_file), str(job))
    assert result.returncode == 0, result.stderr
    assert "v.g[0] t | hi herder" in result.stdout
    bad = herder("run", "--var", "nope", "--config", str(config_file), str(job))
    assert bad.returncode == 2 and "KEY=VALUE" in bad.stderr


def test_a_broken_config_file_exits_2(herder: Herder, tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text("[ports\nmin = 1\n")
    result = herder("run", "--config", str(config), str(EXAMPLES / "hello.hcl"))
    assert result.returncode == 2
    assert "bad.toml" in result.stderr and "Traceback" not in result.stderr


def test_debug_plugins_traces_hook_calls(herder: Herder, config_file: Path) -> None:
    import os

    result = herder("run", "--config", str(config_file), str(EXAMPLES / "hello.hcl"),
                    env={**os.environ, "HERDER_DEBUG_PLUGINS": "1"})
    assert result.returncode == 0, result.stderr
    assert "herder_task_start" in result.stderr and "[herder plugins]" in result.stderr


def test_on_a_terminal_run_shows_a_live_table(config_file: Path) -> None:
    import os
    import pty

    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "herder", "run", "--config", str(config_file),
                             str(EXAMPLES / "counter.yaml")], stdout=terminal, stderr=terminal)
    os.close(terminal)
    output = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        output += chunk
    os.close(controller)
    text = output.decode(errors="replace")
    assert proc.wait(timeout=30) == 0, text
    for header in ("Allocation", "Task", "State", "Restarts", "Last event"):
        assert header in text
    assert "counter.count[2]" in text and "Not Restarting" in text
