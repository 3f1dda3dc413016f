"""Consul Connect end to end: the countdash shape with Consul's built-in proxy, real namespaces and a
real Consul. The dashboard reaches the API only through its upstream, and Consul's intentions decide."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import httpx

from herder.client.alloc_runner import AllocRunner
from tests.support.consul import ConsulAgent
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
