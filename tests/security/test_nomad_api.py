"""The Nomad-compatible listener (``[nomad_api] bind``, SPEC §17) is a second door into the agent.

Each test is an attack through it: a request without the agent's token, a
listener opened beyond loopback without one, a job whose text reaches for the
agent's files, a body built to exhaust the parser. Each must be refused
cleanly (Nomad's 403, a 4xx naming the problem), leak nothing, and leave the
agent answering.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from herder.agent.daemon import check_exposure
from herder.client.config import Config, NomadApiConfig
from herder.errors import ConfigError
from tests.core.agent.conftest import ticker
from tests.core.nomad_api.conftest import NomadAgent, require_nomad
from tests.support.waiting import wait_for

TOKEN = "nomad-door-token"
SECRET = "s3cret-4c1d-never-show-me"
JOB = {"Job": {"ID": "door", "Type": "batch", "TaskGroups": [{"Name": "g", "Tasks": [
    {"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/true"}}]}]}}


def started(root: Path, token: str = "") -> Iterator[NomadAgent]:
    agent = NomadAgent(root, token=token)
    agent.start()
    try:
        yield agent
    finally:
        agent.shutdown()


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    yield from started(tmp_path_factory.mktemp("guarded"), TOKEN)


@pytest.fixture(scope="module")
def open_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    yield from started(tmp_path_factory.mktemp("open"))


@pytest.mark.parametrize("headers", [{}, {"X-Nomad-Token": "wrong"}, {"Authorization": "Bearer wrong"},
                                     {"X-Nomad-Token": TOKEN[:-1]}])
def test_the_nomad_listener_refuses_a_request_without_the_token(guarded: NomadAgent,
                                                                headers: dict[str, str]) -> None:
    with httpx.Client(base_url=guarded.nomad_url, timeout=30.0, headers=headers) as http:
        for method, path in (("GET", "/v1/jobs"), ("GET", "/v1/agent/self"), ("PUT", "/v1/jobs"),
                             ("GET", "/v1/client/fs/logs/x?task=t"), ("GET", "/v1/no/such/route"),
                             ("GET", "/v1/agent/monitor"), ("PUT", "/v1/node/x/drain"), ("PUT", "/v1/system/gc"),
                             ("PUT", "/v1/search"), ("PUT", "/v1/job/door/plan"), ("GET", "/v1/metrics"),
                             ("PUT", "/v1/validate/job")):
            response = http.request(method, path, content=json.dumps(JOB) if method == "PUT" else None)
            assert response.status_code == 403, (method, path)
            assert response.text.startswith("Permission denied: missing or wrong token (X-Nomad-Token"), response.text
    with guarded.http() as http:  # nothing was submitted
        assert http.get("/v1/jobs").json()["jobs"] == []


@pytest.mark.parametrize("header", ["X-Nomad-Token", "Authorization"])
def test_the_nomad_listener_takes_the_agents_token_as_nomad_sends_it(guarded: NomadAgent, header: str) -> None:
    value = TOKEN if header == "X-Nomad-Token" else f"Bearer {TOKEN}"
    with httpx.Client(base_url=guarded.nomad_url, timeout=30.0, headers={header: value}) as http:
        assert http.get("/v1/jobs").status_code == 200


def test_the_nomad_command_line_needs_the_token(guarded: NomadAgent) -> None:
    require_nomad()
    refused = guarded.nomad("job", "status", token="")
    assert refused.returncode == 1 and "403 (Permission denied: missing or wrong token" in refused.stderr
    assert guarded.nomad("job", "status").returncode == 0  # NOMAD_TOKEN set to the agent's token


def test_a_nomad_listener_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    config = Config(data_dir=tmp_path, nomad_api=NomadApiConfig("0.0.0.0:4646"))
    with pytest.raises(ConfigError, match=re.escape("refusing to listen on 0.0.0.0:4646 without a token")):
        check_exposure(config, config.nomad_api.bind)
    check_exposure(Config(data_dir=tmp_path, token="t"), "0.0.0.0:4646")


def test_the_agent_does_not_start_with_an_open_nomad_listener(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(f'data_dir = "{tmp_path / "data"}"\n[nomad_api]\nbind = "0.0.0.0:4999"\n')
    agent = subprocess.run([sys.executable, "-m", "herder", "agent", "--config", str(tmp_path / "agent.toml"),
                            "--bind", "127.0.0.1:4998"], capture_output=True, text=True, timeout=60)
    assert agent.returncode == 1
    assert "refusing to listen on 0.0.0.0:4999 without a token" in agent.stderr


def test_a_job_parsed_there_reads_no_file_of_the_agent(open_agent: NomadAgent, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    hcl = f'job "leak" {{\n meta {{ x = file("{secret}") }}\n group "g" {{ task "t" {{ driver = "raw_exec"\n' \
          ' config { command = "/bin/true" } } }\n}'
    with open_agent.nomad_http() as http:
        response = http.post("/v1/jobs/parse", json={"JobHCL": hcl})
    assert response.status_code == 400
    assert SECRET not in response.text
    assert "job.meta.x: file() is not available to jobs submitted to the agent" in response.text


def test_a_template_sourced_from_the_agents_files_is_refused_naming_the_path(open_agent: NomadAgent,
                                                                            tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    job = json.loads(json.dumps(JOB))
    job["Job"]["TaskGroups"][0]["Tasks"][0]["Templates"] = [{"SourcePath": str(secret), "DestPath": "local/out"}]
    with open_agent.nomad_http() as http:
        response = http.put("/v1/jobs", json=job)
    assert response.status_code == 400
    assert "job.groups[0].tasks[0].templates[0].source" in response.text and SECRET not in response.text


def test_a_job_validated_there_reads_no_file_of_the_agent(open_agent: NomadAgent, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    job = json.loads(json.dumps(JOB))
    job["Job"]["TaskGroups"][0]["Tasks"][0]["Templates"] = [{"SourcePath": str(secret), "DestPath": "local/out"}]
    with open_agent.nomad_http() as http:
        response = http.put("/v1/validate/job", json=job)
    assert response.status_code == 200
    assert any("job.groups[0].tasks[0].templates[0].source" in error for error in response.json()["ValidationErrors"])
    assert SECRET not in response.text


def test_logs_name_a_task_never_a_path(open_agent: NomadAgent) -> None:
    with open_agent.nomad_http() as http:
        assert http.put("/v1/jobs", json={"Job": {**JOB["Job"], "Type": "service", "TaskGroups": [
            {"Name": "g", "Tasks": [{"Name": "t", "Driver": "raw_exec",
                                     "Config": {"command": "/bin/sleep", "args": ["60"]}}]}]}}).status_code == 200
        alloc = http.get("/v1/job/door/allocations").json()[0]["ID"]
        for task in ("../../../../etc/passwd", "t/../../t", "/etc/passwd"):
            response = http.get(f"/v1/client/fs/logs/{alloc}", params={"task": task, "plain": "true"})
            assert response.status_code == 404 and "root:" not in response.text, task
        for params in ({"task": "t", "type": "../../../../etc/passwd"}, {"task": "t", "origin": "/etc"}):
            assert http.get(f"/v1/client/fs/logs/{alloc}", params=params).status_code == 400


@pytest.mark.parametrize("body", [
    '{"Job": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"Job": {"ID": "deep", "Meta": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}}",
    json.dumps({"JobHCL": 'job "deep" {\n meta = { x = ' + "[" * 20_000 + "]" * 20_000 + " }\n}"}),
])
def test_deeply_nested_bodies_are_a_clean_400(open_agent: NomadAgent, body: str) -> None:
    paths = ["/v1/jobs/parse"] if "JobHCL" in body else ["/v1/jobs", "/v1/validate/job"]
    with open_agent.nomad_http() as http:
        for path in paths:
            response = http.put(path, content=body)
            assert response.status_code == 400, (path, response.text)
        assert http.get("/v1/regions").status_code == 200


def test_a_body_over_the_limit_is_refused_before_it_is_parsed(open_agent: NomadAgent) -> None:
    with open_agent.nomad_http() as http:
        response = http.put("/v1/jobs", content=b'{"Job": {"ID": "big", "Meta": {"x": "' + b"a" * (5 << 20) + b'"}}}')
    assert response.status_code == 413


def test_the_nomad_exec_socket_wants_nomads_token_and_the_agents_origin(guarded: NomadAgent, tmp_path: Path) -> None:
    """``nomad alloc exec``'s WebSocket runs a command in a task: without the token, or from a page of
    another site, the handshake is refused before anything runs."""
    alloc_id = str(guarded.submit(ticker("nomad-exec"))["allocations"][0]["id"])
    guarded.wait_task(alloc_id, "t")

    def url(marker: Path) -> str:
        query = urlencode({"task": "t", "tty": "false",
                           "command": json.dumps(["/bin/sh", "-c", f"touch {marker}; echo ran"])})
        return f"ws://127.0.0.1:{guarded.nomad_port}/v1/client/allocation/{alloc_id}/exec?{query}"

    marker = tmp_path / "ran"
    for headers in ({}, {"X-Nomad-Token": "wrong"}, {"Authorization": "Bearer wrong"}, {"X-Nomad-Token": TOKEN[:-1]}):
        with pytest.raises(InvalidStatus) as refused:
            connect(url(marker), additional_headers=headers)
        assert refused.value.response.status_code == 401, headers
    with pytest.raises(InvalidStatus) as refused:
        connect(url(marker), additional_headers={"X-Nomad-Token": TOKEN}, origin="http://evil.example")
    assert refused.value.response.status_code == 403
    control = tmp_path / "control"
    with connect(url(control), additional_headers={"X-Nomad-Token": TOKEN}) as ws:
        wait_for(lambda: "exited" in json.loads(ws.recv(timeout=30)), what="the exit frame")
    assert control.exists() and not marker.exists(), "a refused handshake ran its command"


@pytest.mark.parametrize("page", ["jobs/door", "/evil.example/x", "..%2F..%2Fv1%2Fjobs", "%5C%5Cevil.example",
                                  "jobs/%0d%0aSet-Cookie:%20x=y"])
def test_the_ui_address_without_the_token_only_says_where_the_ui_is(guarded: NomadAgent, page: str) -> None:
    """``nomad ui`` opens ``/ui/...`` of this listener in a browser, which has no token: that answer is outside
    the token's guard, so it must give nothing but the main listener's sign-in page, whatever the path."""
    with httpx.Client(base_url=guarded.nomad_url, timeout=30.0) as browser:
        answer = browser.get(f"/ui/{page}")
        assert "set-cookie" not in answer.headers
        if "%0d" not in page:  # a path with a line break is no page: 404
            assert answer.status_code == 307 and answer.content == b""
            assert answer.headers["location"].startswith(f"{guarded.url}/ui/")
        else:
            assert answer.status_code == 404 and "location" not in answer.headers
        for method in ("PUT", "POST", "DELETE"):
            assert browser.request(method, f"/ui/{page}").status_code in (403, 404, 405)
        spoofed = browser.get(f"/ui/{page}", headers={"Host": "evil.example"})
        assert spoofed.status_code == 403 and "location" not in spoofed.headers
        root = browser.get("/")  # Nomad's root, its UI: also outside the guard, and only that
        assert root.status_code == 307 and root.headers["location"] == "/ui/" and root.content == b""
        assert browser.post("/", content=b"{}").status_code == 403
