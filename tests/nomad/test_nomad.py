"""herder as a Nomad task driver, against the real Nomad on PATH."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.nomad.helpers import NomadCluster, free_port, wait_for
from tests.support.http import read_url
from tests.support.processes import alive
from tests.support.terminal import Terminal
from tests.support.waiting import TIMEOUT

RECORDING_PLUGINS = (Path(__file__).resolve().parents[1] / "support" / "testplugins.py").read_text()


def job_file(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.nomad"
    path.write_text(text)
    return path


def raw_exec_job(name: str, script: str, *, type: str = "batch", count: int = 1, extra: str = "") -> str:
    return f"""
job "{name}" {{
  datacenters = ["dc1"]
  type = "{type}"
  group "g" {{
    count = {count}
    restart {{
      attempts = 0
      mode = "fail"
    }}
    task "t" {{
      driver = "herder"
      kill_timeout = "3s"
      config {{
        driver = "raw_exec"
        config = {{
          command = "/bin/sh"
          args = ["-c", {json.dumps(script)}]
        }}
      }}
      {extra}
    }}
  }}
}}
"""


def docker_web_job(name: str, image: str, port: int, page: str) -> str:
    """A busybox httpd through herder's docker driver on the static ``port``, serving ``page``
    (a Nomad template) as its index."""
    return f"""
job "{name}" {{
  datacenters = ["dc1"]
  group "{name}" {{
    network {{
      port "http" {{
        static = {port}
        to     = 8080
      }}
    }}
    task "server" {{
      driver = "herder"
      kill_timeout = "2s"
      config {{
        driver = "docker"
        config = {{
          image   = "{image}"
          command = "httpd"
          args    = ["-f", "-p", "8080", "-h", "/local"]
        }}
      }}
      template {{
        data        = {json.dumps(page)}
        destination = "local/index.html"
      }}
    }}
  }}
}}
"""


def test_the_herder_driver_is_detected_and_healthy_with_its_drivers_attributes(cluster: NomadCluster) -> None:
    cluster.add("dev", mode="dev")
    node = cluster.wait_ready()[0]
    herder = node["Drivers"]["herder"]
    assert herder["Detected"] and herder["Healthy"], herder
    attributes = cluster.api(f"/v1/node/{node['ID']}")["Attributes"]
    assert attributes["driver.herder"] == "1"
    assert attributes["driver.herder.raw_exec"] == "true"
    assert attributes["driver.herder.raw_exec.healthy"] == "true"
    assert "raw_exec" in herder["HealthDescription"]


def test_raw_exec_is_off_unless_the_plugin_block_enables_it(cluster: NomadCluster) -> None:
    cluster.add("dev", mode="dev", raw_exec=False)
    node = wait_for(lambda: [n for n in cluster.try_api("/v1/nodes") or []
                             if "herder" in (n.get("Drivers") or {})], 90, "the herder driver")[0]
    attributes = wait_for(lambda: (cluster.api(f"/v1/node/{node['ID']}")["Attributes"] or {}).get(
        "driver.herder.raw_exec") and cluster.api(f"/v1/node/{node['ID']}")["Attributes"], what="attributes")
    assert attributes["driver.herder.raw_exec.detected"] == "true"
    assert attributes["driver.herder.raw_exec.healthy"] == "false"


def test_a_batch_job_through_raw_exec_logs_and_exit_code(cluster: NomadCluster, tmp_path: Path) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    cluster.run_job(job_file(tmp_path, "hello", raw_exec_job(
        "hello", "echo hello from $NOMAD_TASK_NAME in $HERDER_ALLOC_NAME; echo to stderr >&2; exit 3")))
    alloc = cluster.wait_alloc("hello", "failed")[0]
    assert cluster.logs(alloc["ID"], "t") == "hello from t in hello.g[0]\n"
    assert cluster.logs(alloc["ID"], "t", stderr=True) == "to stderr\n"
    terminated = [e for e in cluster.events(alloc["ID"], "t") if e["Type"] == "Terminated"]
    assert terminated and terminated[0]["ExitCode"] == 3
    status = cluster.nomad("alloc", "status", alloc["ID"]).stdout
    assert "Exit Code: 3" in status


def test_a_config_error_is_a_driver_failure_naming_its_path(cluster: NomadCluster, tmp_path: Path) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    cluster.run_job(job_file(tmp_path, "bad", """
job "bad" {
  datacenters = ["dc1"]
  type = "batch"
  group "g" {
    restart {
      attempts = 0
      mode = "fail"
    }
    task "t" {
      driver = "herder"
      config {
        driver = "raw_exec"
        config = { args = ["x"], comand = "/bin/true" }
      }
    }
  }
}
"""))
    alloc = cluster.wait_alloc("bad", "failed")[0]
    failures = [e for e in cluster.events(alloc["ID"], "t") if e["Type"] == "Driver Failure"]
    assert failures, cluster.events(alloc["ID"], "t")
    message = failures[0]["DisplayMessage"]
    assert "job.group[g].task[t].config" in message, message
    assert "command" in message and "comand" in message, message


def test_an_unknown_herder_driver_is_named(cluster: NomadCluster, tmp_path: Path) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    cluster.run_job(job_file(tmp_path, "nodriver", raw_exec_job("nodriver", "true").replace(
        'driver = "raw_exec"', 'driver = "nosuch"')))
    alloc = cluster.wait_alloc("nodriver", "failed")[0]
    failures = [e["DisplayMessage"] for e in cluster.events(alloc["ID"], "t") if e["Type"] == "Driver Failure"]
    assert failures and "job.group[g].task[t].config.driver: 'nosuch' is not a herder driver" in failures[0]


def test_a_service_stops_gracefully(cluster: NomadCluster, tmp_path: Path) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    marker = tmp_path / "stopped"
    script = f"trap 'echo got INT > {marker}; exit 0' INT; echo $$ > {tmp_path / 'pid'}; while :; do sleep 0.1; done"
    cluster.run_job(job_file(tmp_path, "svc", raw_exec_job("svc", script, type="service")))
    alloc = cluster.wait_alloc("svc", "running")[0]
    pid = int(wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip(),
                       what="the task's pid"))
    cluster.nomad("job", "stop", "svc")
    cluster.wait_alloc("svc", "complete")
    assert marker.read_text() == "got INT\n"
    assert not alive(pid)
    types = [e["Type"] for e in cluster.events(alloc["ID"], "t")]
    assert "Killing" in types and "Killed" in types


def test_a_task_that_ignores_its_signal_is_killed_after_kill_timeout(cluster: NomadCluster, tmp_path: Path) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    script = f"trap '' INT TERM; echo $$ > {tmp_path / 'pid'}; while :; do sleep 0.1; done"
    cluster.run_job(job_file(tmp_path, "stubborn", raw_exec_job("stubborn", script, type="service")))
    alloc = cluster.wait_alloc("stubborn", "running")[0]
    pid = int(wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip(),
                       what="the task's pid"))
    cluster.nomad("job", "stop", "-detach", "stubborn")
    wait_for(lambda: not alive(pid), what="the task to be killed")
    events = {e["Type"]: e for e in cluster.events(alloc["ID"], "t")}
    assert "Killing" in events
    terminated = wait_for(lambda: [e for e in cluster.events(alloc["ID"], "t") if e["Type"] == "Terminated"],
                          what="Terminated")
    assert terminated[0]["Signal"] == signal.SIGKILL or terminated[0]["ExitCode"] == 137
    killed_after = (terminated[0]["Time"] - events["Killing"]["Time"]) / 1e9
    assert killed_after >= 2.5, killed_after  # kill_timeout = 3s


def test_exec_and_signal_in_a_running_task(cluster: NomadCluster, tmp_path: Path) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    script = "trap 'echo got HUP' HUP; echo ready > $NOMAD_TASK_DIR/ready; while :; do sleep 0.1; done"
    cluster.run_job(job_file(tmp_path, "ex", raw_exec_job("ex", script, type="service")))
    alloc = cluster.wait_alloc("ex", "running")[0]
    wait_for(lambda: "ready" in cluster.nomad("alloc", "exec", "-i=false", "-t=false", alloc["ID"], "cat",
                                              "local/ready", check=False).stdout, what="exec to see the task's file")
    failed = cluster.nomad("alloc", "exec", "-i=false", "-t=false", alloc["ID"], "/bin/sh", "-c",
                           "echo out; echo err >&2; exit 7", check=False)
    assert (failed.returncode, failed.stdout, failed.stderr) == (7, "out\n", "err\n")
    # Interactive, on a terminal: through the driver's exec session.
    shell = Terminal(["nomad", "alloc", "exec", "-i", "-t", alloc["ID"], "/bin/sh"], cluster.cli_env)
    try:
        shell.type(b"tty\n")
        shell.expect(rb"/dev/pts/\d+")
        shell.type(b"echo $((6*7))\n")
        shell.expect(rb"\b42\b")
        shell.type(b"exit 3\n")
        assert shell.proc.wait(TIMEOUT) == 3, bytes(shell.output)
    finally:
        shell.close()
    cluster.nomad("alloc", "signal", "-s", "SIGHUP", alloc["ID"], "t")
    wait_for(lambda: "got HUP" in cluster.logs(alloc["ID"], "t"), what="the task to get SIGHUP")

    def rss() -> int:
        stats = cluster.try_api(f"/v1/client/allocation/{alloc['ID']}/stats") or {}
        task = (stats.get("Tasks") or {}).get("t") or {}
        return int(((task.get("ResourceUsage") or {}).get("MemoryStats") or {}).get("RSS") or 0)
    assert wait_for(rss, 30, "the task's memory in Nomad's stats") > 0


@pytest.mark.slow
def test_a_docker_task_serves_on_its_nomad_port(cluster: NomadCluster, tmp_path: Path, docker_driver: str,
                                                busybox_image: str) -> None:
    cluster.add("dev", mode="dev")
    cluster.wait_ready()
    port = free_port()
    cluster.run_job(job_file(tmp_path, "web", docker_web_job(
        "web", busybox_image, port, 'served by herder under nomad, port {{ env "NOMAD_HOST_PORT_http" }}')))
    alloc = cluster.wait_alloc("web", "running")[0]
    assert read_url(f"http://127.0.0.1:{port}/") == f"served by herder under nomad, port {port}".encode()
    listing = cluster.nomad("alloc", "exec", "-i=false", "-t=false", alloc["ID"], "ls", "/local").stdout
    assert "index.html" in listing
    containers = subprocess.run(["docker", "ps", "-q", "--filter", f"name={alloc['ID']}"],
                                capture_output=True, text=True, check=True).stdout.split()
    cluster.nomad("job", "stop", "web")
    cluster.wait_alloc("web", "complete")
    for container in containers:
        gone = subprocess.run(["docker", "inspect", container], capture_output=True)
        assert gone.returncode != 0, f"container {container} left behind"


def test_a_task_survives_a_client_restart_and_is_recovered(cluster: NomadCluster, tmp_path: Path) -> None:
    server = cluster.add("server", mode="server")
    wait_for(lambda: cluster.try_api("/v1/status/leader"), 60, "a leader")
    agent = cluster.add("client", mode="client", servers=[server])
    cluster.wait_ready()
    starts = tmp_path / "starts"
    script = f"echo $$ >> {starts}; while :; do sleep 0.1; done"
    cluster.run_job(job_file(tmp_path, "long", raw_exec_job("long", script, type="service")))
    alloc = cluster.wait_alloc("long", "running")[0]
    pid = int(wait_for(lambda: starts.exists() and starts.read_text().strip(), what="the task's pid"))
    agent.stop(signal.SIGTERM)
    assert alive(pid), "the task died with the Nomad agent"
    agent.start()
    cluster.wait_ready()
    # The plugin's Reattached reaches Nomad: it is held until Nomad takes the task's events again.
    wait_for(lambda: _reattached(cluster, alloc["ID"], "t"), RECOVERY_TIMEOUT, lambda: _recovery_seen(agent.log))
    assert "no handler registered for event" not in agent.log.read_text(errors="replace")
    assert cluster.alloc(alloc["ID"])["ClientStatus"] == "running"
    assert starts.read_text().split() == [str(pid)], "the task was started twice"
    assert alive(pid), _recovery_seen(agent.log)
    cluster.nomad("job", "stop", "long")
    cluster.wait_alloc("long", "complete")
    assert not alive(pid)


RECOVERY_TIMEOUT = 180.0
"""A bound, not a measure: a restarted Nomad client starts the plugin three times and recovers its
tasks after it has registered again, which on 2 cores shared with the rest of CI took over 60 s once."""


def _reattached(cluster: NomadCluster, alloc_id: str, task: str) -> bool:
    """The plugin's ``Reattached`` is among the task's events in Nomad."""
    return any(e["Type"] == "Reattached" or "Reattached" in e.get("DisplayMessage", "")
               for e in cluster.events(alloc_id, task))


def _recovery_seen(log: Path) -> str:
    """What the client's log says of the plugin and of its tasks' recovery, for a failed wait."""
    words = ("driver=herder", "plugins/herder", "recover", "restor", "Reattach")
    lines = [line for line in log.read_text(errors="replace").splitlines() if any(w in line for w in words)]
    return "recovery; the client's log said:\n" + "\n".join(lines[-40:])


def test_a_job_spreads_over_two_clients_through_herder(cluster: NomadCluster, tmp_path: Path) -> None:
    server = cluster.add("server", mode="server")
    wait_for(lambda: cluster.try_api("/v1/status/leader"), 60, "a leader")
    for name in ("client1", "client2"):
        cluster.add(name, mode="client", servers=[server])
    nodes = cluster.wait_ready(clients=2)
    assert len(nodes) == 2
    cluster.run_job(job_file(tmp_path, "spread", raw_exec_job(
        "spread", "echo $NOMAD_ALLOC_INDEX on $(hostname); while :; do sleep 0.1; done", type="service", count=4
    ).replace('group "g" {', 'group "g" {\n    spread {\n      attribute = "${node.unique.id}"\n    }')))
    allocs = cluster.wait_alloc("spread", "running", count=4)
    assert {a["NodeID"] for a in allocs} == {n["ID"] for n in nodes}


def test_a_third_party_lifecycle_plugin_takes_part(cluster: NomadCluster, tmp_path: Path,
                                                   install: Callable[..., Path]) -> None:
    install("herder-greeter", "1.0", {"herder.plugins": {"greeter": "herder_greeter:Greeter"}}, {
        "herder_greeter.py": '''
from pathlib import Path
from herder import hookimpl


class Greeter:
    def __init__(self, config):
        self.greeting = config.get("greeting", "hello")

    @hookimpl
    def herder_task_prestart(self, task, ctx):
        ctx.env["GREETING"] = f"{self.greeting} {ctx.task_name} of {ctx.job_name}"
        ctx.emit_event("Driver", "greeter was here")

    @hookimpl
    def herder_task_cleanup(self, task, ctx):
        (ctx.task_dir.alloc_dir / "greeter-cleaned").write_text(task.name)
'''})
    cluster.add("dev", mode="dev", plugin_tables='greeter = { greeting = "bonjour" }')
    cluster.wait_ready()
    cluster.run_job(job_file(tmp_path, "greet", raw_exec_job("greet", "echo $GREETING")))
    alloc = cluster.wait_alloc("greet", "complete")[0]
    assert cluster.logs(alloc["ID"], "t") == "bonjour t of greet\n"
    messages = [e.get("DisplayMessage", "") for e in cluster.events(alloc["ID"], "t")]
    assert "greeter was here" in messages


def test_hooks_in_order_and_a_recoverable_start_failure_restarts_the_task(
        cluster: NomadCluster, tmp_path: Path, install: Callable[..., Path]) -> None:
    install("herder-testplugins", "1.2.3",
            {"herder.plugins": {"recorder": "herder_testplugins:Recorder"},
             "herder.drivers": {"recdriver": "herder_testplugins:RecordingDriver"}},
            {"herder_testplugins.py": RECORDING_PLUGINS})
    hooks = tmp_path / "hooks.jsonl"
    cluster.add("dev", mode="dev", plugin_tables=f"""
      recorder  = {{ log = "{hooks}" }}
      recdriver = {{ log = "{hooks}", recoverable_once = ["herder_task_start"] }}""")
    cluster.wait_ready()
    cluster.run_job(job_file(tmp_path, "rec", """
job "rec" {
  datacenters = ["dc1"]
  type = "batch"
  group "g" {
    restart {
      attempts = 1
      delay    = "1s"
      mode     = "fail"
    }
    task "t" {
      driver = "herder"
      config {
        driver = "recdriver"
        config = { command = "/bin/sh", args = ["-c", "echo recorder saw: $RECORDER_SEEN"] }
      }
    }
  }
}
"""))
    alloc = cluster.wait_alloc("rec", "complete")[0]
    assert cluster.logs(alloc["ID"], "t") == "recorder saw: yes\n"
    types = [e["Type"] for e in cluster.events(alloc["ID"], "t")]
    assert "Driver Failure" in types and "Restarting" in types, types
    calls = [(e["hook"], e["kind"]) for e in map(json.loads, hooks.read_text().splitlines())
             if e["hook"] not in ("herder_task_event", "herder_driver_fingerprint", "herder_driver_task_schema")]
    # The allocation's hooks once each, around both tries: the first start failed with a recoverable error.
    assert (calls[0], calls[-1]) == (("herder_alloc_prerun", "lifecycle"), ("herder_alloc_postrun", "lifecycle"))
    calls = calls[1:-1]
    first_try = [("herder_task_prestart", "lifecycle"), ("herder_task_prestart", "driver"),
                 ("herder_task_start", "driver"), ("herder_task_cleanup", "driver"),
                 ("herder_task_cleanup", "lifecycle")]
    assert calls[:5] == first_try, calls
    assert calls[5:] == [
        ("herder_task_prestart", "lifecycle"), ("herder_task_prestart", "driver"), ("herder_task_start", "driver"),
        ("herder_task_poststart", "lifecycle"), ("herder_task_poststart", "driver"),
        ("herder_task_exited", "lifecycle"), ("herder_task_exited", "driver"),
        ("herder_task_cleanup", "driver"), ("herder_task_cleanup", "lifecycle"),
    ], calls


def test_a_herder_that_cannot_be_imported_does_not_stop_the_agent(
        cluster: NomadCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A broken installation: a "herder" package that fails to import, first on the plugin's path.
    shadow = tmp_path / "shadow" / "herder"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('herder is broken here')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    cluster.add("dev", mode="dev")
    node = wait_for(lambda: [n for n in cluster.try_api("/v1/nodes") or []
                             if n.get("Status") == "ready" and "herder" in (n.get("Drivers") or {})], 90,
                    "a ready node that knows the herder driver")[0]
    herder = node["Drivers"]["herder"]
    assert not herder["Detected"] and not herder["Healthy"]
    assert "herder is broken here" in herder["HealthDescription"]


@pytest.mark.slow
def test_a_docker_task_is_recovered_after_a_client_restart(cluster: NomadCluster, tmp_path: Path,
                                                           docker_driver: str, busybox_image: str) -> None:
    server = cluster.add("server", mode="server")
    wait_for(lambda: cluster.try_api("/v1/status/leader"), 60, "a leader")
    client = cluster.add("client", mode="client", servers=[server])
    cluster.wait_ready()
    port = free_port()
    cluster.run_job(job_file(tmp_path, "box", docker_web_job("box", busybox_image, port, "still here")))
    alloc = cluster.wait_alloc("box", "running")[0]
    assert read_url(f"http://127.0.0.1:{port}/") == b"still here"

    def containers() -> list[str]:
        return subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"name={alloc['ID']}"],
                              capture_output=True, text=True, check=True).stdout.split()
    before = containers()
    assert len(before) == 1
    client.stop(signal.SIGTERM)
    assert containers() == before, "the container did not outlive the Nomad client"
    client.start()
    cluster.wait_ready()
    wait_for(lambda: _reattached(cluster, alloc["ID"], "server"), RECOVERY_TIMEOUT,
             lambda: _recovery_seen(client.log))
    assert cluster.alloc(alloc["ID"])["ClientStatus"] == "running"
    assert containers() == before, "the task was started again"
    assert read_url(f"http://127.0.0.1:{port}/") == b"still here"
    cluster.nomad("job", "stop", "box")
    cluster.wait_alloc("box", "complete")
    wait_for(lambda: not containers(), what="the container to be removed")
