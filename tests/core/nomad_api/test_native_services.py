"""Native service discovery through a real agent and real raw_exec tasks.

A job's ``service { provider = "nomad" }`` lands in the agent's embedded registry,
another job's template finds it with ``nomadService`` and renders again when it moves
or goes, and the registry answers in Nomad 1.3's shapes (``/v1/services``,
``/v1/service/NAME``) and through ``herder service list|info``. With Consul as the
agent's default backend, a ``nomad`` service still stays out of Consul.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.core.nomad_api.conftest import NomadAgent
from tests.support.agent import AgentProcess
from tests.support.consul import ConsulAgent
from tests.support.waiting import wait_for

# Agents, Consul and tasks as subprocesses: what they test is the same on every Python.
pytestmark = pytest.mark.slow

REGISTRATION_KEYS = {"ID", "ServiceName", "Namespace", "NodeID", "Datacenter", "JobID", "AllocID", "Tags",
                     "Address", "Port", "CreateIndex", "ModifyIndex"}


SLEEP = 'command = "/bin/sleep"\n        args = ["300"]'
SERVE = 'command = "/usr/bin/busybox"\n        args = ["httpd", "-f", "-p", "127.0.0.1:${NOMAD_PORT_http}"]'
TCP_CHECK = 'check {\n          type = "tcp"\n          interval = "1s"\n          timeout = "1s"\n        }'


def provider_job(name: str, service: str, *, provider: str = 'provider = "nomad"', tags: str = '["v1"]',
                 config: str = SLEEP, check: str = "") -> str:
    return f'''
job "{name}" {{
  group "g" {{
    network {{
      port "http" {{}}
    }}
    task "server" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        {config}
      }}
      service {{
        name = "{service}"
        port = "http"
        tags = {tags}
        {provider}
        {check}
      }}
    }}
  }}
}}
'''


def reader_job(name: str, service: str) -> str:
    template = (f'{{{{ range nomadService \\"{service}\\" }}}}{{{{ .Address }}}}:{{{{ .Port }}}} '
                f'{{{{ .JobID }}}}\\n{{{{ end }}}}')
    return f'''
job "{name}" {{
  group "g" {{
    task "reader" {{
      driver       = "raw_exec"
      kill_timeout = "2s"
      config {{
        command = "/bin/sleep"
        args    = ["300"]
      }}
      template {{
        data        = "{template}"
        destination = "local/upstreams"
        change_mode = "noop"
      }}
    }}
  }}
}}
'''


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    agent = NomadAgent(tmp_path_factory.mktemp("native-services"),
                       extra='[plugin.templates]\npoll_interval = "100ms"\n')
    agent.start()
    try:
        yield agent
    finally:
        agent.shutdown()


def running_alloc(agent: AgentProcess, text: str) -> str:
    alloc_id = str(agent.submit(text)["allocations"][0]["id"])
    agent.wait_task(alloc_id, next(iter(agent.alloc(alloc_id)["tasks"])))
    return alloc_id


def stop(agent: AgentProcess, job: str) -> None:
    with agent.http() as http:
        assert http.delete(f"/v1/jobs/{job}").status_code == 200


def registrations(agent: NomadAgent, service: str) -> list[dict[str, Any]]:
    return list(agent.get(f"/v1/service/{service}"))


def test_a_template_finds_another_jobs_service_and_follows_it(agent: NomadAgent) -> None:
    first = running_alloc(agent, provider_job("upstream-one", "backend"))
    [one] = wait_for(lambda: registrations(agent, "backend"), what="the first instance registered")
    assert (one["JobID"], one["AllocID"]) == ("upstream-one", first)
    reader = running_alloc(agent, reader_job("reader", "backend"))
    rendered = agent.data_dir / "allocs" / reader / "reader" / "local" / "upstreams"
    assert rendered.read_text() == f"{one['Address']}:{one['Port']} upstream-one\n"

    # The service moves: its first instance goes, another job's comes, on another port.
    running_alloc(agent, provider_job("upstream-two", "backend"))
    stop(agent, "upstream-one")
    [two] = wait_for(lambda: [r for r in registrations(agent, "backend") if r["JobID"] == "upstream-two"]
                     if len(registrations(agent, "backend")) == 1 else None, what="only the second instance")
    assert two["Port"] != one["Port"]
    wait_for(lambda: rendered.read_text() == f"{two['Address']}:{two['Port']} upstream-two\n",
             what=lambda: f"the template following the move; it reads {rendered.read_text()!r}")

    # And it goes: the template is rendered empty, as Nomad's.
    stop(agent, "upstream-two")
    wait_for(lambda: rendered.read_text() == "", what=lambda: f"an empty template; it reads {rendered.read_text()!r}")
    events = [e["message"] for e in agent.alloc(reader)["tasks"]["reader"]["events"] if e["type"] == "Template"]
    assert len(events) >= 2 and set(events) == {"Template re-rendered: local/upstreams"}, events
    stop(agent, "reader")


def test_the_registry_answers_in_nomads_shapes(agent: NomadAgent) -> None:
    alloc_id = running_alloc(agent, provider_job("shapes", "shaped", tags='["b", "a"]'))
    [registration] = wait_for(lambda: registrations(agent, "shaped"), what="the instance registered")
    assert set(registration) == REGISTRATION_KEYS
    node = agent.get("/v1/nodes")[0]["ID"]
    assert {k: registration[k] for k in ("ServiceName", "Namespace", "NodeID", "Datacenter", "JobID", "AllocID",
                                         "Tags")} == {
        "ServiceName": "shaped", "Namespace": "default", "NodeID": node, "Datacenter": "dc1", "JobID": "shapes",
        "AllocID": alloc_id, "Tags": ["b", "a"]}
    assert registration["ID"] == f"_herder-task-{alloc_id}-server-shaped-http"
    assert 2000 <= registration["Port"] <= 12000
    listing = agent.get("/v1/services")
    assert listing[0]["Namespace"] == "default"
    assert {"ServiceName": "shaped", "Tags": ["a", "b"]} in listing[0]["Services"]
    assert agent.get("/v1/service/unknown") == []
    assert agent.get("/v1/service/shaped", choose="1|some-alloc") == [registration]
    with agent.nomad_http() as http:
        refused = http.get("/v1/service/shaped", params={"choose": "one|x"})
        assert (refused.status_code, refused.text) == (
            400, "failed to choose services: Parameter for choose must be in form '<number>|<key>'")
        assert http.get("/v1/services", params={"namespace": "other"}).json() == []

    # A blocking read answers once the registry changes.
    with agent.nomad_http() as http:
        index = int(http.get("/v1/service/shaped").headers["X-Nomad-Index"])
    answer: list[httpx.Response] = []

    def block() -> None:
        with agent.nomad_http() as http:
            answer.append(http.get("/v1/service/shaped", params={"index": index, "wait": "2m"}))

    reader = threading.Thread(target=block)
    reader.start()
    stop(agent, "shapes")
    reader.join(60)
    assert answer[0].json() == []
    assert int(answer[0].headers["X-Nomad-Index"]) > index


def test_herder_service_list_and_info(agent: NomadAgent) -> None:
    alloc_id = running_alloc(agent, provider_job("listed", "listed-svc", tags='["web"]'))
    wait_for(lambda: registrations(agent, "listed-svc"), what="the instance registered")
    listed = agent.cli("service", "list")
    assert listed.returncode == 0, listed.stderr
    assert "listed-svc" in listed.stdout and "[web]" in listed.stdout
    info = agent.cli("service", "info", "listed-svc")
    assert info.returncode == 0, info.stderr
    header, row = info.stdout.splitlines()
    assert header.split() == ["Job", "ID", "Alloc", "ID", "Address", "Tags"]
    assert row.split()[:2] == ["listed", alloc_id[:8]]
    missing = agent.cli("service", "info", "nothing-here")
    assert missing.returncode == 1
    assert "service nothing-here not found" in missing.stderr
    stop(agent, "listed")


def test_mixed_providers_in_a_group_are_refused(agent: NomadAgent) -> None:
    text = provider_job("mixed", "m").replace('    task "server" {', '''    service {
      name     = "front"
      port     = "http"
      provider = "consul"
    }
    task "server" {''')
    with agent.http() as http:
        response = http.post("/v1/jobs", json={"text": text, "format": "hcl"})
    assert response.status_code == 400
    assert any("job.groups[0].tasks[0].services[0].provider: Multiple service providers used" in error
               for error in response.json()["errors"])


def test_a_nomad_service_stays_out_of_the_default_consul(tmp_path: Path, consul: ConsulAgent) -> None:
    agent = AgentProcess(tmp_path, extra=f'[services]\nbackend = "consul"\n'
                                         f'[consul]\naddress = "{consul.address}"\n')
    agent.start()
    try:
        native = running_alloc(agent, provider_job("native", "native-svc", config=SERVE, check=TCP_CHECK))
        in_consul = running_alloc(agent, provider_job("in-consul", "consul-svc", provider=""))
        wait_for(lambda: any(s["Service"] == "consul-svc" for s in consul.services().values()),
                 what=lambda: f"consul-svc in Consul; it holds {consul.services()}")
        with agent.http() as http:
            listed = http.get("/v1/services").json()["services"]
            assert listed == [{"name": "native-svc", "tags": ["v1"]}]
            [instance] = http.get("/v1/services/native-svc").json()["instances"]
        assert instance["alloc_id"] == native
        assert not any(s["Service"] == "native-svc" for s in consul.services().values())
        # Its check is run by herder, as Nomad runs a native service's checks itself.
        wait_for(lambda: [c["status"] for c in agent.alloc(native)["tasks"]["server"]["checks"]] == ["passing"],
                 what=lambda: f"the native check passing: {agent.alloc(native)['tasks']['server']['checks']}")
        assert all(c["ServiceName"] != "native-svc" for c in consul.checks().values())
        stop(agent, "native")
        stop(agent, "in-consul")
        agent.wait_task(in_consul, "server", "dead")
        wait_for(lambda: not any(s["Service"] == "consul-svc" for s in consul.services().values()),
                 what="consul-svc out of Consul once its job stopped")
    finally:
        agent.shutdown()


def test_provider_consul_goes_to_consul_when_the_default_is_the_embedded_registry(
        tmp_path: Path, consul: ConsulAgent) -> None:
    agent = AgentProcess(tmp_path, extra=f'[consul]\naddress = "{consul.address}"\n')
    agent.start()
    try:
        alloc_id = running_alloc(agent, provider_job("explicit", "explicit-svc", provider='provider = "consul"'))
        [registered] = wait_for(lambda: [s for s in consul.services().values() if s["Service"] == "explicit-svc"],
                                what=lambda: f"explicit-svc in Consul; it holds {consul.services()}")
        assert registered["ID"] == f"_herder-task-{alloc_id}-server-explicit-svc-http"
        with agent.http() as http:
            assert http.get("/v1/services").json()["services"] == []
        stop(agent, "explicit")
        wait_for(lambda: not any(s["Service"] == "explicit-svc" for s in consul.services().values()),
                 what="explicit-svc out of Consul once its job stopped")
    finally:
        agent.shutdown()
