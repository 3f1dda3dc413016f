"""Closed by default: an agent with no ``token`` configured, on loopback, is still no open door.

Every account of the host and every task that shares the host's network reaches a loopback agent.
Each test is one of them trying to run something through the default agent (its API, its
Nomad-compatible listener, its exec WebSocket) as root; all get 401 or 403, and nothing runs.
Only root reads the token the agent made, and root's command line finds it.
"""

from __future__ import annotations

import json
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.core.agent.conftest import ticker
from tests.core.nomad_api.conftest import NomadAgent
from tests.support.agent import AgentProcess
from tests.support.consul import free_ports

NOBODY = pwd.getpwnam("nobody")
AS_NOBODY = ["setpriv", f"--reuid={NOBODY.pw_uid}", f"--regid={NOBODY.pw_gid}", "--clear-groups"]
CURL = ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10"]


def touching(marker: Path, name: str) -> str:
    """A job that, run, leaves ``marker`` behind: the proof that something ran."""
    return (f'job "{name}" {{\n type = "batch"\n group "g" {{\n task "t" {{\n driver = "raw_exec"\n'
            f' config {{\n command = "/usr/bin/touch"\n args = ["{marker}"]\n }}\n }}\n }}\n}}\n')


def nomad_job(marker: Path, name: str) -> dict[str, object]:
    return {"Job": {"ID": name, "Type": "batch", "TaskGroups": [{"Name": "g", "Tasks": [
        {"Name": "t", "Driver": "raw_exec", "Config": {"command": "/usr/bin/touch", "args": [str(marker)]}}]}]}}


def attacks(agent: NomadAgent, marker: Path, alloc_id: str) -> list[tuple[str, list[str]]]:
    """Each way of a client without the token to run ``touch marker`` as root: (what, curl's arguments)."""
    command = urlencode({"task": "t", "command": json.dumps(["/usr/bin/touch", str(marker)])})
    return [
        ("job run", ["-X", "POST", "-H", "Content-Type: application/json", "--data",
                     json.dumps({"text": touching(marker, "api"), "format": "hcl"}), f"{agent.url}/v1/jobs"]),
        ("exec", ["-X", "POST", "-H", "Content-Type: application/json", "--data",
                  json.dumps({"task": "t", "command": ["/usr/bin/touch", str(marker)]}),
                  f"{agent.url}/v1/allocations/{alloc_id}/exec"]),
        ("exec WebSocket", ["--http1.1", "-H", "Connection: Upgrade", "-H", "Upgrade: websocket",
                            "-H", "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                            f"{agent.url}/v1/allocations/{alloc_id}/exec?{command}"]),
        ("nomad job run", ["-X", "PUT", "-H", "Content-Type: application/json", "--data",
                           json.dumps(nomad_job(marker, "nomad")), f"{agent.nomad_url}/v1/jobs"]),
        ("metrics", [f"{agent.url}/v1/metrics"]),
        ("nomad monitor", [f"{agent.nomad_url}/v1/agent/monitor?log_level=debug"]),
        ("nomad node drain", ["-X", "PUT", "-H", "Content-Type: application/json", "--data",
                              json.dumps({"DrainSpec": {"Deadline": 0}}), f"{agent.nomad_url}/v1/node/any/drain"]),
        ("nomad system gc", ["-X", "PUT", f"{agent.nomad_url}/v1/system/gc"]),
        ("health", [f"{agent.url}/v1/health"]),
    ]


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    """The default agent: no token configured; raw_exec (which runs as root) and the Nomad listener on."""
    process = NomadAgent(tmp_path_factory.mktemp("closed"))
    process.start()
    try:
        process.data_dir.chmod(0o711)  # as a task run as a user of the host needs it: traversable
        yield process
    finally:
        process.shutdown()


@pytest.fixture(scope="module")
def alloc_id(agent: NomadAgent) -> str:
    """A task of root's, running: what an exec would enter."""
    alloc = str(agent.submit(ticker("roots"))["allocations"][0]["id"])
    agent.wait_task(alloc, "t")
    return alloc


def jobs(agent: AgentProcess) -> list[str]:
    with agent.http() as http:
        return sorted(job["name"] for job in http.get("/v1/jobs").json()["jobs"])


def test_another_user_of_the_host_runs_nothing(agent: NomadAgent, alloc_id: str, tmp_path: Path) -> None:
    marker = tmp_path / "ran-as-root"
    for what, arguments in attacks(agent, marker, alloc_id):
        ran = subprocess.run([*AS_NOBODY, *CURL, *arguments], capture_output=True, text=True, timeout=60)
        assert ran.stdout in ("401", "403"), (what, ran.stdout, ran.stderr)
    assert not marker.exists()
    assert jobs(agent) == ["roots"]


def test_another_user_can_neither_read_the_token_nor_use_it(agent: NomadAgent, tmp_path: Path) -> None:
    marker = tmp_path / "ran-as-root"
    token_file = agent.data_dir / "agent.token"
    stolen = subprocess.run([*AS_NOBODY, "cat", str(token_file)], capture_output=True, text=True, timeout=60)
    assert stolen.returncode != 0 and "Permission denied" in stolen.stderr and stolen.stdout == ""
    body = json.dumps({"text": touching(marker, "stolen"), "format": "hcl"})
    script = (f'curl -s -o /dev/null -w %{{http_code}} -X POST -H "Content-Type: application/json" '
              f'-H "Authorization: Bearer $(cat {token_file} 2>/dev/null)" --data \'{body}\' {agent.url}/v1/jobs')
    ran = subprocess.run([*AS_NOBODY, "sh", "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.stdout == "401", ran
    assert not marker.exists() and "stolen" not in jobs(agent)


def test_a_task_reaches_the_agent_for_nothing(agent: NomadAgent, tmp_path: Path) -> None:
    marker = tmp_path / "ran-as-root"
    api = json.dumps({"text": touching(marker, "api-inside"), "format": "hcl"})
    script = (f"curl -s -o /dev/null -w 'api=%{{http_code}}\\n' -X POST -H 'Content-Type: application/json' "
              f"--data '{api}' {agent.url}/v1/jobs; "
              f"curl -s -o /dev/null -w 'nomad=%{{http_code}}\\n' -X PUT -H 'Content-Type: application/json' "
              f"--data '{json.dumps(nomad_job(marker, 'nomad-inside'))}' {agent.nomad_url}/v1/jobs")
    argument = json.dumps(script).replace("%{", "%%{").replace("${", "$${")  # an HCL string, not a template
    job = (f'job "inside" {{\n type = "batch"\n group "g" {{\n task "t" {{\n driver = "raw_exec"\n'
           f' user = "nobody"\n config {{\n command = "/bin/sh"\n args = ["-c", {argument}]\n }}\n }}\n }}\n}}\n')
    alloc = str(agent.submit(job)["allocations"][0]["id"])
    agent.wait_task(alloc, "t", "dead")
    with agent.http() as http:
        output = http.get(f"/v1/allocations/{alloc}/logs/t").text
    assert output.splitlines() == ["api=401", "nomad=403"], output
    assert not marker.exists()
    assert "api-inside" not in jobs(agent) and "nomad-inside" not in jobs(agent)


def test_roots_command_line_finds_the_token_without_being_told(agent: NomadAgent, alloc_id: str) -> None:
    # HERDER_TOKEN empty: as if not set. The configuration names the data dir; without it, the default one.
    found = agent.cli("job", "status", "--config", str(agent.config), token="")
    assert found.returncode == 0 and "roots" in found.stdout, found.stderr
    ran = agent.cli("alloc", "exec", "-i=false", "--config", str(agent.config), alloc_id, "t", "echo", "in", token="")
    assert (ran.returncode, ran.stdout) == (0, "in\n"), ran.stderr
    elsewhere = agent.cli("job", "status", token="")  # root's default data dir is not this agent's
    assert elsewhere.returncode == 1
    assert "reads it from <data_dir>/agent.token; or set HERDER_TOKEN" in elsewhere.stderr, elsewhere.stderr


def test_insecure_no_token_is_for_loopback_alone(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n[agent]\ninsecure_no_token = true\n')
    refused = subprocess.run([sys.executable, "-m", "herder", "agent", "--config", str(config),
                              "--bind", f"0.0.0.0:{free_ports(1)[0]}"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1
    assert "without a token" in refused.stderr and "insecure_no_token is for loopback alone" in refused.stderr
    assert not (tmp_path / "data").exists()


def test_insecure_no_token_opens_loopback_and_says_so_at_every_start(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path, extra="[agent]\ninsecure_no_token = true\n").start()
    try:
        assert agent.token == "" and not (agent.data_dir / "agent.token").exists()
        with agent.http() as http:
            assert http.get("/v1/jobs").status_code == 200
        agent.terminate()
        agent.start()
        warnings = [line for line in agent.log.read_text().splitlines() if "level=warning" in line]
        assert len([line for line in warnings if "insecure_no_token" in line and "as root" in line]) == 2, warnings
    finally:
        agent.shutdown()
