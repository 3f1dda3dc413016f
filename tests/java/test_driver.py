"""What a JVM task gets from the java driver: its command line, environment, memory, files and signals,
as a plain process and isolated in herder-exec's container."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from herder_java.driver import JavaDriver
from herder_java.handle import JavaHandle

from herder import DriverError
from herder.testing import DriverHarness
from herder.testing.plugin import HarnessFactory
from tests.support.http import read_url
from tests.support.waiting import wait_for

from .conftest import EXEC_INSTALLED
from .helpers import CLASSES, LIB, MAIN_CLASS, PLAIN, app

MIB = 1024 * 1024


@pytest.fixture(params=["plain", "isolated"])
def harness(request: pytest.FixtureRequest, java_driver: str, java_app: None,
            driver_harness: HarnessFactory) -> DriverHarness:
    """A harness of the java driver, once as plain processes and once isolated (where herder-exec is)."""
    config = PLAIN if request.param == "plain" else request.getfixturevalue("isolated")
    return driver_harness("java", config)


def isolated(harness: DriverHarness) -> bool:
    return harness.plugin_config.get("isolation") == "exec"


def run_to_end(harness: DriverHarness, config: dict[str, Any], **fields: Any) -> tuple[int, str]:
    """Start a task, wait for its exit: its exit code and its stdout (and stderr, after it)."""
    run = harness.task(config, **fields)
    run.start()
    result = run.wait(60)
    assert result is not None, "the task did not exit within 60 s"
    return result.exit_code, (run.output("stdout") + run.output("stderr")).decode()


def lines(output: str, kind: str) -> dict[str, str]:
    """``kind NAME=value`` lines of the test application's ``env`` mode, as a dict."""
    found = {}
    for line in output.splitlines():
        if line.startswith(kind + " "):
            name, _, value = line[len(kind) + 1:].partition("=")
            found[name] = value
    return found


def test_the_environment_memory_and_options_reach_the_jvm(harness: DriverHarness) -> None:
    code, output = run_to_end(harness, app("env", jvm_options=["-Dherder.greeting=hello there", "-XX:+UseSerialGC"]),
                              env={"GREETING": "hi"}, resources={"memory": 160})
    assert code == 0, output
    env, props = lines(output, "env"), lines(output, "prop")
    assert env["GREETING"] == "hi"
    assert env["NOMAD_ALLOC_NAME"].endswith("[0]") and env["NOMAD_MEMORY_LIMIT"] == "160"
    assert props["herder.greeting"] == "hello there"
    jvm_args = [line.removeprefix("jvmarg ") for line in output.splitlines() if line.startswith("jvmarg ")]
    assert [arg for arg in jvm_args if arg.startswith("-Xmx")] == ["-Xmx160m"]
    max_memory = int(next(line.split()[1] for line in output.splitlines() if line.startswith("maxMemory ")))
    assert 0.85 * 160 * MIB <= max_memory <= 160 * MIB  # Serial GC keeps one survivor space out of the count
    if isolated(harness):
        assert (env["NOMAD_TASK_DIR"], env["NOMAD_ALLOC_DIR"], props["user.name"]) == ("/local", "/alloc", "nobody")
        assert props["java.io.tmpdir"] == "/tmp"
    else:
        assert env["NOMAD_TASK_DIR"].endswith("/local") and Path(env["NOMAD_TASK_DIR"]).is_dir()
        assert props["java.io.tmpdir"].endswith("/tmp") and props["java.io.tmpdir"] != "/tmp"


def test_an_xmx_of_the_jvm_options_wins_over_the_memory(harness: DriverHarness) -> None:
    code, output = run_to_end(harness, app("env", jvm_options=["-Xmx48m"]), resources={"memory": 160})
    assert code == 0, output
    assert [line for line in output.splitlines() if line.startswith("jvmarg -Xmx")] == ["jvmarg -Xmx48m"]
    assert int(next(line.split()[1] for line in output.splitlines() if line.startswith("maxMemory "))) <= 48 * MIB


def test_the_exit_code_and_arguments(harness: DriverHarness) -> None:
    assert run_to_end(harness, app("exit", "42"))[0] == 42
    code, output = run_to_end(harness, app("print", "two words, one argument"))
    assert (code, output) == (0, "two words, one argument\n")


@pytest.mark.parametrize("class_path", [CLASSES, f"{LIB}/*", f"local/nothing-here:{CLASSES}"])
def test_a_main_class_on_a_class_path(harness: DriverHarness, class_path: str) -> None:
    if class_path.startswith("local/nothing-here"):
        run = harness.task({"class": MAIN_CLASS, "class_path": class_path, "args": ["print", "x"]})
        with pytest.raises(DriverError, match=r"config\.class_path: local/nothing-here does not exist"):
            run.start()
        return
    code, output = run_to_end(harness, {"class": MAIN_CLASS, "class_path": class_path, "args": ["print", "by class"]})
    assert (code, output) == (0, "by class\n")


def test_the_jar_path_as_the_task_sees_it(harness: DriverHarness) -> None:
    code, output = run_to_end(harness, {"jar_path": "${NOMAD_TASK_DIR}/app.jar", "args": ["print", "found"]})
    assert (code, output) == (0, "found\n")


@pytest.mark.parametrize(("jar_path", "message"), [
    ("local/missing.jar", "local/missing.jar does not exist in the task directory"),
    ("../../outside.jar", "path '../../outside.jar' escapes the task directory"),
    ("/etc/hostname", "path '/etc/hostname' escapes the task directory"),
])
def test_a_jar_that_is_not_in_the_task_directory_is_named(harness: DriverHarness, jar_path: str,
                                                          message: str) -> None:
    run = harness.task({"jar_path": jar_path})
    with pytest.raises(DriverError) as raised:
        run.start()
    error = str(raised.value)
    assert error.startswith(f"job.group[{run.ctx.group_name}].task[{run.ctx.task_name}].config.jar_path: {message}"), \
        error
    assert run.handle is None


def test_serves_http_and_runs_its_shutdown_hooks_on_the_default_signal(harness: DriverHarness) -> None:
    run = harness.task(app("serve", "${NOMAD_PORT_http}"), kill_timeout="10s",
                       resources={"network": {"ports": [{"label": "http"}]}})
    handle = run.start()
    [port] = run.ctx.ports
    body = read_url(f"http://{port.host_ip}:{port.value}/", timeout=30)
    assert body == f"hello from java in {run.ctx.alloc_name}\n".encode()
    run.kill()  # no kill_signal: the driver's SIGTERM
    result = run.wait(10)
    assert result is not None and result.exit_code == 143, result  # 128 + SIGTERM: the JVM's own exit
    assert run.output().decode().splitlines()[-1] == "shutdown hook ran"
    assert handle.state()["isolation"] == ("exec" if isolated(harness) else "none")


def test_exec_runs_where_the_jvm_runs(harness: DriverHarness) -> None:
    run = harness.task(app("until-killed"), kill_timeout="5s")
    run.prestart()
    run.ctx.env["READY_FILE"] = run.task_path("ready")
    run.start()
    wait_for(lambda: run.local_file("ready").is_file(), what="the task ready")
    result = run.exec(["/bin/sh", "-c", "pwd; ls local/app.jar; id -un"], 10)
    output = result.output.decode().splitlines()
    assert result.exit_code == 0 and output[1] == "local/app.jar", output
    if isolated(harness):
        assert (output[0], output[-1]) == ("/", "nobody")
        one = run.exec(["/bin/sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"], 10).output.decode()
        assert "-jar /local/app.jar until-killed" in one, one
    else:
        assert output[0] == str(run.ctx.task_dir.dir)
    run.kill()


def test_an_isolated_jvm_sees_only_its_task_directories_and_the_jdk(java_driver: str, java_app: None,
                                                                    isolated: dict[str, str],
                                                                    driver_harness: HarnessFactory) -> None:
    harness = driver_harness("java", isolated)
    secret = harness.data_dir.parent / "host-secret"
    secret.write_text("secret\n")
    java_home = Path(os.path.realpath(shutil.which("java") or "java")).parent.parent
    paths = ["/local/app.jar", "/alloc/data", "/secrets", "/tmp", str(java_home / "lib"), str(secret),
             str(harness.data_dir), "/root", "/home"]
    code, output = run_to_end(harness, app("exists", *paths))
    assert code == 0, output
    seen = dict(line.rsplit(" ", 1) for line in output.splitlines())
    assert seen == {**{path: "yes" for path in paths[:5]}, **{path: "no" for path in paths[5:]}}


def test_a_jdk_outside_the_system_directories_is_bound_read_only(java_driver: str, java_app: None,
                                                                isolated: dict[str, str],
                                                                driver_harness: HarnessFactory,
                                                                tmp_path: Path) -> None:
    real = Path(os.path.realpath(shutil.which("java") or "java")).parent.parent
    jdk = tmp_path / "jdk"
    subprocess.run(["cp", "-al", str(real), str(jdk)], check=True)  # hard links: no copy of 300 MB
    jdk.chmod(0o755)
    tmp_path.chmod(0o755)
    harness = driver_harness("java", {**isolated, "java": str(jdk / "bin" / "java")})
    run = harness.task(app("env"))
    run.start()
    result = run.wait(60)
    assert result is not None and result.exit_code == 0, (result, run.output("stderr"))
    assert lines(run.output().decode(), "prop")["java.home"] == str(jdk)
    mounts = json.loads((run.ctx.task_dir.dir / "bundle" / "config.json").read_text())["mounts"]
    [bind] = [mount for mount in mounts if mount["destination"] == str(jdk)]
    assert (bind["source"], "ro" in bind["options"]) == (str(jdk), True)


def test_auto_isolates_where_herder_exec_can(java_driver: str, driver_harness: HarnessFactory) -> None:
    fingerprint = driver_harness("java", {}).fingerprint
    assert fingerprint.detected and fingerprint.healthy, fingerprint
    exec_healthy = False
    if EXEC_INSTALLED:
        from herder.testing.harness import load_hooks

        exec_fingerprint = load_hooks("exec", {}).fingerprint("exec")
        exec_healthy = exec_fingerprint.detected and exec_fingerprint.healthy
    assert fingerprint.attributes["driver.java.isolation"] == ("exec" if exec_healthy else "none")
    if not EXEC_INSTALLED:
        assert "herder-exec is not installed" in fingerprint.description


def test_isolation_exec_without_herder_exec_makes_the_driver_unhealthy(java_driver: str,
                                                                      driver_harness: HarnessFactory) -> None:
    if EXEC_INSTALLED:
        fingerprint = driver_harness("java", {"isolation": "exec", "exec": {"runc": "/nonexistent/runc"}}).fingerprint
        assert "runc not found: /nonexistent/runc" in fingerprint.description
    else:
        fingerprint = driver_harness("java", {"isolation": "exec"}).fingerprint
        assert "herder-exec is not installed" in fingerprint.description
    assert fingerprint.detected and not fingerprint.healthy, fingerprint
    assert fingerprint.attributes["driver.java.version"]


@pytest.mark.parametrize(("script", "description"), [
    ("echo 'Error: could not find libjava.so' >&2; exit 1", "-version failed: Error: could not find libjava.so"),
    ("echo 'not a JVM'", "no version in the output of java -version (it printed 'not a JVM')"),
])
def test_a_java_that_gives_no_version_is_not_detected(java_driver: str, driver_harness: HarnessFactory,
                                                     tmp_path: Path, script: str, description: str) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text(f"#!/bin/sh\n{script}\n")
    java.chmod(0o755)
    fingerprint = driver_harness("java", {**PLAIN, "java": str(java)}).fingerprint
    assert (fingerprint.detected, fingerprint.healthy) == (False, False)
    assert fingerprint.description.endswith(description), fingerprint.description


def test_the_working_directory_and_nomads_isolation_keys(harness: DriverHarness) -> None:
    config = app("env", work_dir="local", pid_mode="host", cap_add=["net_raw"])
    run = harness.task(config)
    run.start()
    result = run.wait(60)
    assert result is not None and result.exit_code == 0, (result, run.output("stderr"))
    user_dir = lines(run.output().decode(), "prop")["user.dir"]
    assert user_dir == ("/local" if isolated(harness) else str(run.ctx.task_dir.local_dir))
    messages = [event.message for event in run.events if event.type == "Driver"]
    assert "ignoring config keys herder's java driver does not implement: cap_add, pid_mode" in messages, messages


@pytest.mark.parametrize("config", [
    {"isolation": "none"},
    # auto, where herder-exec cannot isolate (or is not installed): no quiet fallback to a plain process
    {"isolation": "auto", "exec": {"runc": "/nonexistent/runc"}},
])
def test_plain_jvms_need_allow_unisolated(java_driver: str, driver_harness: HarnessFactory,
                                          config: dict[str, Any]) -> None:
    harness = driver_harness("java", {**config, "allow_unisolated": False})
    fingerprint = harness.fingerprint
    assert fingerprint.detected and not fingerprint.healthy, fingerprint
    assert "which this client does not allow: set [plugin.java] allow_unisolated = true" in fingerprint.description
    with pytest.raises(DriverError, match="allow_unisolated"):
        harness.task(app("env")).start()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_plain_exec_runs_as_the_task_user(java_driver: str, driver_harness: HarnessFactory) -> None:
    """A plain JVM of ``user = "nobody"``: what runs beside it (script checks, alloc exec) is nobody's too.
    (The JVM itself is not started: as nobody it could not reach a task directory under a 0700 tmp_path.)"""
    harness = driver_harness("java", PLAIN)
    run = harness.task(app("env"), user="nobody")
    driver = JavaDriver(PLAIN)
    handle = JavaHandle(SimpleNamespace(id="jvm", network=None), "none")  # type: ignore[arg-type]
    result = driver.herder_task_exec(run.task, run.ctx, handle, ["/bin/sh", "-c", 'echo "$(id -un) $HOME"'], 10)
    assert result.exit_code == 0, result.output
    assert result.output.decode().split() == ["nobody", pwd.getpwnam("nobody").pw_dir]
