"""Consul Connect end to end: the countdash shape with Consul's built-in proxy, real namespaces and a
real Consul. The dashboard reaches the API only through its upstream, and Consul's intentions decide."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from herder.client.alloc_runner import AllocRunner
from tests.support.consul import ConsulAgent
from tests.support.foreground import HerderRun, task_dirs
from tests.support.network import require_networking
from tests.support.processes import wait_until_gone
from tests.support.require import require
from tests.support.running import Run, make_config, start_job
from tests.support.waiting import poll, wait_for

COUNTDASH = """
job "countdash" {
  group "api" {
    network {
      mode = "bridge"
    }
    service {
      name = "count-api"
      port = "9001"
      connect {
        sidecar_service {}
      }
    }
    task "web" {
      driver = "raw_exec"
      config {
        command = "busybox"
        args    = ["httpd", "-f", "-p", "127.0.0.1:9001", "-h", "local"]
      }
      template {
        destination = "local/index.html"
        data        = "count from {{ env \\"NOMAD_ALLOC_ID\\" }}"
      }
    }
  }
  group "dashboard" {
    network {
      mode = "bridge"
    }
    service {
      name = "count-dashboard"
      port = "9002"
      connect {
        sidecar_service {
          proxy {
            upstreams {
              destination_name = "count-api"
              local_bind_port  = 8080
            }
          }
        }
      }
    }
    task "dashboard" {
      driver = "raw_exec"
      env {
        COUNTING_SERVICE_URL = "http://${NOMAD_UPSTREAM_ADDR_count_api}"
      }
      config {
        command = "busybox"
        args    = ["sleep", "3600"]
      }
    }
  }
}
"""


def _alloc(run: Run, group: str) -> AllocRunner:
    return next(alloc for alloc in run.runner.allocs if alloc.group.name == group)


def _fetch(run: Run, url: str) -> tuple[int, str]:
    """``wget`` of ``url`` from inside the dashboard's namespace: its exit code and output."""
    runner = next(task for task in _alloc(run, "dashboard").tasks if task.name == "dashboard")
    result = runner.exec(["busybox", "wget", "-q", "-O", "-", url], 10)
    return result.exit_code, result.output.decode(errors="replace")


def _consul_cli(consul: ConsulAgent, *args: str) -> None:
    subprocess.run(["consul", *args], check=True, timeout=30, capture_output=True,
                   env={**os.environ, "CONSUL_HTTP_ADDR": consul.address})


def test_countdash_reaches_the_api_only_through_its_upstream_and_intentions_decide(
        data_dir: Path, consul: ConsulAgent) -> None:
    require_networking()
    require("busybox", shutil.which("busybox") is not None, "busybox is not installed")
    config = dataclasses.replace(make_config(data_dir), services_backend="consul", consul={"address": consul.address})
    run, wait = start_job(COUNTDASH, data_dir, config=config)
    try:
        for task in ("web", "dashboard", "connect-proxy-count-api", "connect-proxy-count-dashboard"):
            run.wait_for("Started", task)
        api = _alloc(run, "api")
        # Through the upstream, over both sidecars' mutual TLS, once Consul sees the API's sidecar healthy.
        answer = wait_for(lambda: (lambda got: got[1] if got[0] == 0 else None)(_fetch(run, "http://127.0.0.1:8080/")),
                          what="the API through the upstream")
        assert answer == f"count from {api.placed.alloc.id}"
        # The API listens only in its own namespace: neither the dashboard's loopback nor the host's has it.
        assert _fetch(run, "http://127.0.0.1:9001/")[0] != 0
        assert _host_refused("http://127.0.0.1:9001/")
        dashboard_env = next(t for t in _alloc(run, "dashboard").tasks if t.name == "dashboard").ctx.env
        assert dashboard_env["COUNTING_SERVICE_URL"] == "http://127.0.0.1:8080"
        assert dashboard_env["NOMAD_UPSTREAM_ADDR_count-api"] == "127.0.0.1:8080"
        sidecar = consul.services()[f"_herder-group-{api.placed.alloc.id}-api-count-api-9001-sidecar-proxy"]
        assert sidecar["Kind"] == "connect-proxy" and sidecar["Address"] == api.placed.alloc.network.ip  # type: ignore[union-attr]

        _consul_cli(consul, "intention", "create", "-deny", "count-dashboard", "count-api")
        try:
            assert poll(lambda: _fetch(run, "http://127.0.0.1:8080/")[0] != 0), "a deny intention let the call through"
        finally:
            _consul_cli(consul, "intention", "delete", "count-dashboard", "count-api")
    finally:
        run.runner.stop()
        assert wait() == "stopped"
    # Nothing is left: no service in Consul, no proxy, no socket to Consul.
    assert [sid for sid in consul.services() if sid.startswith("_herder-")] == []
    assert wait_until_gone(data_dir) == {}
    assert list(data_dir.glob("allocs/*/alloc/tmp/consul_*.sock")) == []


def _host_refused(url: str) -> bool:
    try:
        httpx.get(url, timeout=1)
    except httpx.HTTPError:
        return True
    return False


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "countdash.nomad"


def test_the_countdash_example_runs_unchanged(data_dir: Path, consul: ConsulAgent) -> None:
    """Nomad's demo as the example gives it: the dashboard's page, on its static host port, is the API's
    answer fetched through the mesh."""
    require("busybox", shutil.which("busybox") is not None, "busybox is not installed")
    config = dataclasses.replace(make_config(data_dir), services_backend="consul", consul={"address": consul.address})
    run, wait = start_job(EXAMPLE.read_text(), data_dir, config=config)
    try:
        run.wait_for("Started", "dashboard")
        api = _alloc(run, "api")

        def page() -> str | None:
            try:
                answer = httpx.get("http://127.0.0.1:9002/cgi-bin/count", timeout=5)
            except httpx.HTTPError:
                return None
            return answer.text if answer.status_code == 200 and answer.text else None

        assert wait_for(page, what="the dashboard's page") == f'{{"count": 1, "hostname": "{api.placed.alloc.id}"}}\n'
    finally:
        run.runner.stop()
        assert wait() == "stopped"
    assert wait_until_gone(data_dir) == {}


FAKE_ENVOY = """#!/bin/sh
# Answers Consul's version probe as Envoy 1.18 does; run, keeps the bootstrap Consul hands it.
if [ "$1" = "--version" ]; then
  echo "envoy  version: 98c1c9e9a40804b93b074badad1cdf284b47d58b/1.18.3/Clean/RELEASE/BoringSSL"
  exit 0
fi
while [ $# -gt 0 ]; do
  if [ "$1" = "--config-path" ]; then cat "$2" > "$NOMAD_ALLOC_DIR/$NOMAD_TASK_NAME.json"; fi
  shift
done
exec sleep 3600
"""


def test_where_envoy_is_installed_the_sidecars_are_envoy_bootstrapped_by_consul(
        data_dir: Path, consul: ConsulAgent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``consul connect envoy`` bootstraps Envoy from the agent, reached through the allocation's sockets;
    two sidecars of a group have admin listeners of their own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "envoy").write_text(FAKE_ENVOY)
    (bin_dir / "envoy").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    config = dataclasses.replace(make_config(data_dir), services_backend="consul", consul={
        "address": consul.address, "grpc_address": f"127.0.0.1:{consul.ports['grpc']}"})
    second = '    service {\n      name = "count-admin"\n      port = "9003"\n      connect {\n' \
             '        sidecar_service {}\n      }\n    }\n'
    api_group = COUNTDASH[:COUNTDASH.index('  group "dashboard"')]
    text = api_group.replace('    task "web"', second + '    task "web"') + "}\n"
    run, wait = start_job(text, data_dir, config=config)
    try:
        api = _alloc(run, "api")
        shared = api.placed.alloc.dir / "alloc"
        for service, port, admin_port in (("count-api", 9001, 19000), ("count-admin", 9003, 19001)):
            path = shared / f"connect-proxy-{service}.json"
            bootstrap = json.loads(wait_for(lambda p=path: p.exists() and p.read_text(), what=f"{path.name}"))
            # Envoy takes its configuration over gRPC from the agent, through the allocation's socket.
            [cluster] = [c for c in bootstrap["static_resources"]["clusters"] if c["name"] == "local_agent"]
            assert "alloc/tmp/consul_grpc.sock" in json.dumps(cluster)
            assert bootstrap["node"]["id"] == \
                f"_herder-group-{api.placed.alloc.id}-api-{service}-{port}-sidecar-proxy"
            assert bootstrap["admin"]["address"]["socket_address"]["port_value"] == admin_port
        tmp_fd = os.open(shared / "tmp", os.O_RDONLY | os.O_DIRECTORY)
        try:  # a socket's path is at most 107 bytes: reached through the directory's descriptor
            with socket.socket(socket.AF_UNIX) as relayed:
                relayed.settimeout(5)
                relayed.connect(f"/proc/self/fd/{tmp_fd}/consul_grpc.sock")
        finally:
            os.close(tmp_fd)
    finally:
        run.runner.stop()
        assert wait() == "stopped"
    assert wait_until_gone(data_dir) == {}


def _reach_in(alloc_id: str, url: str) -> bool:
    """Whether ``url`` answers from inside allocation ``alloc_id``'s namespace."""
    done = subprocess.run(["ip", "netns", "exec", f"herder-{alloc_id}", "busybox", "wget", "-q", "-O", "-", url],
                          capture_output=True, timeout=30, check=False)
    return done.returncode == 0 and done.stdout.startswith(b"count from ")


def test_sidecars_reattached_after_a_kill_reach_consul_again(tmp_path: Path, consul: ConsulAgent) -> None:
    """herder killed with SIGKILL and started again: the running proxies get their socket to Consul
    back (without it the API's proxy cannot authorize a call), and nothing is started twice."""
    require("busybox", shutil.which("busybox") is not None, "busybox is not installed")
    data_dir, job, config = tmp_path / "data", tmp_path / "countdash.hcl", tmp_path / "herder.toml"
    job.write_text(COUNTDASH)
    config.write_text(f'[ports]\nmin = 2000\nmax = 12000\n[services]\nbackend = "consul"\n'
                      f'[consul]\naddress = "{consul.address}"\n')
    first = HerderRun(job, data_dir, "--keep", config=config)
    second: HerderRun | None = None
    try:
        first.wait_for("Started", 4)
        [dashboard] = task_dirs(data_dir, "dashboard")
        alloc_id = dashboard.parent.name
        assert poll(lambda: _reach_in(alloc_id, "http://127.0.0.1:8080/")), "no answer through the upstream"
        first.kill()
        second = HerderRun(job, data_dir, "--keep", config=config)
        second.wait_for("Reattached", 4)
        assert second.of("Started") == [], "a task was started twice"
        assert poll(lambda: _reach_in(alloc_id, "http://127.0.0.1:8080/")), "no answer after the restart"
        assert second.interrupt() == 0, second.stderr
    finally:  # a run still alive stops its tasks (kept tasks would outlive a kill)
        for run in (first, second):
            if run is not None and run.proc.poll() is None:
                run.interrupt()
    assert wait_until_gone(data_dir) == {}
    assert [sid for sid in consul.services() if sid.startswith("_herder-")] == []


def test_a_sidecar_without_consul_fails_saying_why(data_dir: Path) -> None:
    run, wait = start_job(COUNTDASH, data_dir, config=make_config(data_dir))
    assert wait() == "failed"
    messages = [record.event.message for record in run.events if record.task == "connect-proxy-count-api"]
    assert any('it needs services.backend = "consul"' in message for message in messages), messages
    assert wait_until_gone(data_dir) == {}
