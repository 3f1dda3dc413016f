"""Attacks of an API client on the agent: an open bind, a token read off the
network or out of Consul. (Every route needing the token over loopback is
tests/core/agent/test_auth.py.)"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.consul import ConsulAgent, free_ports
from tests.support.tls import Certificates, make_certificates
from tests.support.waiting import wait_for

TOKEN = "Zq7-exposure-token-4b1d"


def answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def outside_address() -> str:
    """An address of this host that is not loopback: where a client on the network connects to."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("198.51.100.1", 9))  # the default route's source address; UDP connect sends nothing
        address = str(probe.getsockname()[0])
    assert not address.startswith("127."), address
    return address


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]", "OUTSIDE"])
def test_an_agent_without_a_token_refuses_a_bind_beyond_loopback(tmp_path: Path, host: str) -> None:
    outside = outside_address()
    host = outside if host == "OUTSIDE" else host
    port = free_ports(1)[0]
    config = tmp_path / "agent.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    proc = subprocess.Popen([sys.executable, "-m", "herder", "agent", "--config", str(config),
                             "--bind", f"{host}:{port}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: proc.poll() is not None or answers("127.0.0.1", port) or answers(outside, port),
                 timeout=30.0, what="the agent to exit or listen")
        listening = proc.poll() is None
    finally:
        proc.kill()
        _, stderr = proc.communicate()
    assert not listening, "the agent listens beyond loopback without a token"
    assert proc.returncode == 1
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "token" in lines[0] and host.strip("[]") in lines[0], stderr
    assert not (tmp_path / "data").exists()  # refused before anything was set up


def test_with_a_token_a_network_client_without_it_changes_nothing(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path, token=TOKEN, host="0.0.0.0").start()
    try:
        alloc_id = agent.submit(ticker())["allocations"][0]["id"]
        agent.wait_task(alloc_id, "t")
        outside = f"http://{outside_address()}:{agent.port}"
        attempts = [("POST", "/v1/jobs", {"text": ticker("other"), "format": "hcl"}),
                    ("DELETE", "/v1/jobs/ticker", None),
                    ("POST", "/v1/agent/drain", None),
                    ("POST", f"/v1/allocations/{alloc_id}/signal", {"task": "t", "signal": "SIGKILL"}),
                    ("POST", f"/v1/allocations/{alloc_id}/restart", {"task": "t"}),
                    ("POST", f"/v1/allocations/{alloc_id}/exec", {"task": "t", "command": ["touch", "x"]})]
        for method, path, body in attempts:
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                response = httpx.request(method, outside + path, json=body, headers=headers, timeout=30.0)
                assert response.status_code == 401, (method, path, response.text)
        status = agent.alloc(alloc_id)["tasks"]["t"]
        assert status["state"] == "running" and status["restarts"] == 0
        jobs = json.loads(agent.cli("job", "status", "--json").stdout)["jobs"]
        assert [job["name"] for job in jobs] == ["ticker"]
    finally:
        agent.shutdown()


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def test_a_tls_agent_is_reached_with_its_ca_and_only_with_it(tmp_path: Path, certificates: Certificates) -> None:
    job = tmp_path / "ticker.hcl"
    job.write_text(ticker())
    agent = AgentProcess(tmp_path, token=TOKEN, tls=certificates).start()
    try:
        ran = agent.cli("job", "run", str(job))
        assert ran.returncode == 0, ran.stderr
        status = agent.cli("job", "status")
        assert status.returncode == 0 and "ticker  running" in status.stdout, status.stderr

        # The token never crosses in the clear: the agent does not speak plain HTTP.
        plain = agent.cli("job", "status", addr=f"http://127.0.0.1:{agent.port}")
        assert plain.returncode == 1 and "ticker" not in plain.stdout
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{agent.port}/v1/jobs", headers=agent.headers, timeout=30.0)

        # A client that does not trust the agent's CA sends nothing: the system store, or another CA.
        other = make_certificates(tmp_path / "other")
        for env in ({"HERDER_CACERT": ""}, {"HERDER_CACERT": str(other.ca)}):
            refused = agent.cli("job", "status", env=env)
            assert refused.returncode == 1, (env, refused.stdout)
            assert len(refused.stderr.strip().splitlines()) == 1 and "certificate" in refused.stderr, refused.stderr
            assert "HERDER_CACERT" in refused.stderr and "ticker" not in refused.stdout
        # ... unless told to verify nothing (tests only).
        assert agent.cli("job", "status", env={"HERDER_CACERT": "", "HERDER_SKIP_VERIFY": "true"}).returncode == 0
    finally:
        agent.shutdown()


def test_consul_stores_no_token_of_the_agent(tmp_path: Path) -> None:
    # Anyone who reads Consul (its API, or its data dir) must not find the agent's token there.
    consul = ConsulAgent(tmp_path / "consul", data_dir=tmp_path / "consul-data").start()
    agent = AgentProcess(tmp_path, token=TOKEN, extra=f'[services]\nbackend = "consul"\n'
                                                      f'[consul]\naddress = "{consul.address}"\n')
    try:
        agent.start()

        def self_check() -> dict[str, object] | None:
            return next((c for c in consul.checks().values() if c["ServiceName"] == "herder-client"
                         and c["Status"] == "passing"), None)

        wait_for(self_check, timeout=30.0, what="the agent's own check passing in consul")
        api = {path: httpx.get(f"{consul.url}{path}", timeout=5.0).text
                    for path in ("/v1/agent/services", "/v1/agent/checks", "/v1/catalog/service/herder-client",
                                 "/v1/health/service/herder-client", "/v1/health/state/any")}
        assert "herder-client" in api["/v1/agent/services"]
        files = {str(path): path.read_bytes() for path in (tmp_path / "consul-data").rglob("*") if path.is_file()}
        assert any(name.rpartition("/")[0].endswith("checks") for name in files)  # it did persist the check
        assert not [where for where, text in api.items() if TOKEN in text]
        assert not [name for name, content in files.items() if TOKEN.encode() in content]
    finally:
        agent.shutdown()
        consul.stop()
