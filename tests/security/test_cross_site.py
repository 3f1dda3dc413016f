"""Security: a web page cannot drive the agent, nor read it.

A browser sends a page's requests to any address, ``127.0.0.1`` included: a "simple" request (a POST of
``text/plain``, a form, no body) goes out without asking the server first, and only its answer is kept
from the page. So a page of any site could submit a job, or drain the agent, were a body decoded whatever
its ``Content-Type`` and a bodiless action taken whatever its ``Origin``. And a site whose name was made to
resolve to 127.0.0.1 (DNS rebinding) is the agent's own origin to the browser: its page reads the agent's
answers, unless the agent refuses a ``Host`` that does not name it.

The attacks run in a real headless Chromium whose resolver maps ``evil.test`` to 127.0.0.1, against an
agent without a token (which has nothing else to refuse them with); the defences are shown besides to be
independent of the token, with the right token and a foreign ``Origin``, ``Host`` or ``Content-Type``.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from herder.agent.samesite import Hosts
from tests.core.nomad_api.conftest import NomadAgent
from tests.support.fileserver import FileServer, serve
from tests.ui.conftest import chromium, require_selenium

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

EVIL = "evil.test"
"""A site of another name, which the browser resolves to 127.0.0.1."""
ALLOWED = "herder.test"
SETTINGS = f'[agent]\nallowed_hosts = ["{ALLOWED}"]\n'
"""The agents' ``[agent]`` table. Once an agent makes a token of its own when it is given none, the agent
without one needs ``insecure_no_token = true`` here."""
TOKEN = "cross-site-t0ken"
SECRET_JOB = "payroll-export"
"""A job the agent has, which a page must not be able to list."""

PARAMETERIZED = f"""
job "{SECRET_JOB}" {{
  type = "batch"
  parameterized {{}}
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{ command = "/bin/true" }}
    }}
  }}
}}
"""


def started(root: Path, token: str = "") -> Iterator[NomadAgent]:
    agent = NomadAgent(root, token=token, extra=SETTINGS).start()
    try:
        assert isinstance(agent, NomadAgent)
        agent.submit(PARAMETERIZED)
        yield agent
    finally:
        agent.shutdown()


@pytest.fixture(scope="module")
def open_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    yield from started(tmp_path_factory.mktemp("open"))


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    yield from started(tmp_path_factory.mktemp("guarded"), TOKEN)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """One browser for the module's attacks."""
    require_selenium()
    with chromium(tmp_path_factory.mktemp("browser"), f"--host-resolver-rules=MAP {EVIL} 127.0.0.1") as driver:
        yield driver


@pytest.fixture(scope="module")
def evil_site() -> Iterator[FileServer]:
    """Another site's page, served on its own port, reached as ``http://evil.test:PORT/``."""
    for server in serve():
        server.files["/"] = b"<!doctype html><title>cute kittens</title>"
        yield server


def simple_request(browser: WebDriver, page: str, url: str, body: str | None = None) -> None:
    """From ``page``, a "simple" cross-site POST of ``url``: ``text/plain``, ``no-cors`` (what a page may
    send without asking the server first), waited for until its (opaque) answer came."""
    browser.get(page)
    outcome = browser.execute_async_script(
        "const [url, body, done] = arguments;"
        "fetch(url, {method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body})"
        "  .then(() => done('answered'), error => done(String(error)));", url, body)
    assert outcome == "answered", outcome


def jobs(agent: NomadAgent) -> list[str]:
    with agent.http() as http:
        return [job["name"] for job in http.get("/v1/jobs").raise_for_status().json()["jobs"]]


def urls(agent: NomadAgent) -> dict[str, str]:
    return {"herder": agent.url, "nomad": agent.nomad_url}


def nomad_job(name: str, marker: Path) -> dict[str, Any]:
    return {"Job": {"ID": name, "Type": "batch", "TaskGroups": [{"Name": "g", "Tasks": [
        {"Name": "t", "Driver": "raw_exec", "Config": {"command": "/bin/touch", "args": [str(marker)]}}]}]}}


def herder_job(name: str, marker: Path) -> dict[str, Any]:
    return {"format": "json", "text": json.dumps(nomad_job(name, marker))}


@pytest.mark.parametrize("listener", ["herder", "nomad"])
def test_a_page_of_another_site_cannot_submit_a_job(open_agent: NomadAgent, browser: WebDriver,
                                                    evil_site: FileServer, tmp_path: Path, listener: str) -> None:
    name, marker = f"from-a-page-{listener}", tmp_path / "ran"
    body = herder_job(name, marker) if listener == "herder" else nomad_job(name, marker)
    simple_request(browser, f"http://{EVIL}:{evil_site.port}/", urls(open_agent)[listener] + "/v1/jobs",
                   json.dumps(body))
    assert name not in jobs(open_agent)  # a submission registers the job before it answers
    assert not marker.exists()


@pytest.mark.parametrize("listener", ["herder", "nomad"])
def test_a_site_rebound_to_loopback_reads_nothing(open_agent: NomadAgent, browser: WebDriver,
                                                  listener: str) -> None:
    """The page is served by the agent itself, as ``evil.test``: the same origin as the agent's answers."""
    port = {"herder": open_agent.port, "nomad": open_agent.nomad_port}[listener]
    browser.get(f"http://{EVIL}:{port}/")
    status, text = browser.execute_async_script(
        "const done = arguments[0];"
        "fetch('/v1/jobs').then(async answer => done([answer.status, await answer.text()]),"
        "                       error => done([0, String(error)]));")
    assert SECRET_JOB not in text
    assert status == 403, text
    # The same read as the agent's own name works: the job is there to be read.
    assert SECRET_JOB in jobs(open_agent)


def foreign(agent: NomadAgent, listener: str, method: str, path: str, **options: Any) -> httpx.Response:
    """``method path`` on ``listener`` of ``agent`` with its token, and ``options`` (headers, content)."""
    headers = {"Authorization": f"Bearer {agent.token}"} if listener == "herder" else {"X-Nomad-Token": agent.token}
    headers |= options.pop("headers", {})
    with httpx.Client(base_url=urls(agent)[listener], timeout=30.0) as http:
        return http.request(method, path, headers=headers, **options)


@pytest.mark.parametrize("listener", ["herder", "nomad"])
def test_a_foreign_origin_is_refused_even_with_the_token(guarded: NomadAgent, listener: str) -> None:
    own = urls(guarded)[listener]
    # Harmless changes: a collection of nothing; a job file parsed.
    method, path, body = {"herder": ("PUT", "/v1/system/gc", None),
                          "nomad": ("PUT", "/v1/jobs/parse", {"JobHCL": PARAMETERIZED})}[listener]
    for origin in (f"http://{EVIL}", "null", own.replace("http:", "https:"), own[:-1]):
        refused = foreign(guarded, listener, method, path, json=body, headers={"Origin": origin})
        assert refused.status_code == 403 and "origin" in refused.text.lower(), (origin, refused.text)
    # The agent's own pages (the UI) send its origin; a command line sends none.
    for headers in ({"Origin": own}, {}):
        accepted = foreign(guarded, listener, method, path, json=body, headers=headers)
        assert accepted.status_code == 200, accepted.text
    # A read is not refused for its Origin: the browser keeps a foreign page from reading the answer.
    assert foreign(guarded, listener, "GET", "/v1/jobs", headers={"Origin": f"http://{EVIL}"}).status_code == 200


@pytest.mark.parametrize("listener", ["herder", "nomad"])
def test_a_host_that_does_not_name_the_agent_is_refused_even_with_the_token(guarded: NomadAgent,
                                                                             listener: str) -> None:
    port = {"herder": guarded.port, "nomad": guarded.nomad_port}[listener]
    for host in (f"{EVIL}:{port}", EVIL, f"127.0.0.1.{EVIL}:{port}", ""):
        refused = foreign(guarded, listener, "GET", "/v1/jobs", headers={"Host": host})
        assert refused.status_code == 403 and SECRET_JOB not in refused.text, (host, refused.text)
    if listener == "herder":  # the web UI's pages too
        assert foreign(guarded, listener, "GET", "/ui/", headers={"Host": EVIL}).status_code == 403
    for host in (f"localhost:{port}", f"127.0.0.2:{port}", f"[::1]:{port}", f"{ALLOWED}:{port}", ALLOWED.upper()):
        assert foreign(guarded, listener, "GET", "/v1/jobs", headers={"Host": host}).status_code == 200, host
    # A WebSocket's handshake goes by the same rule, before its route is looked at.
    path = "/v1/allocations/0/exec" if listener == "herder" else "/v1/client/allocation/0/exec"
    token = {"Authorization": f"Bearer {TOKEN}"} if listener == "herder" else {"X-Nomad-Token": TOKEN}
    with pytest.raises(InvalidStatus) as refused, socket.create_connection(("127.0.0.1", port)) as sock:
        connect(f"ws://{EVIL}:{port}{path}?task=t&command=%5B%22true%22%5D", sock=sock, additional_headers=token)
    assert refused.value.response.status_code == 403


@pytest.mark.parametrize("listener", ["herder", "nomad"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonp"])
def test_a_body_that_is_not_said_to_be_json_is_not_decoded(guarded: NomadAgent, tmp_path: Path, listener: str,
                                                            content_type: str) -> None:
    name = f"typed-{listener}-{content_type.partition('/')[2].partition(';')[0]}"
    body = herder_job(name, tmp_path / "ran") if listener == "herder" else nomad_job(name, tmp_path / "ran")
    refused = foreign(guarded, listener, "POST", "/v1/jobs", content=json.dumps(body),
                      headers={"Content-Type": content_type})
    assert refused.status_code == 415, refused.text
    assert "application/json" in refused.text
    assert name not in jobs(guarded)


def test_json_is_decoded_as_each_listeners_clients_send_it(guarded: NomadAgent, tmp_path: Path) -> None:
    """herder's command line says ``application/json``; Nomad's sends its JSON without a Content-Type."""
    for listener, content_type in (("herder", "application/json"), ("nomad", "application/json; charset=utf-8"),
                                   ("nomad", None)):
        name = f"json-{listener}-{'typed' if content_type else 'untyped'}"
        body = herder_job(name, tmp_path / name) if listener == "herder" else nomad_job(name, tmp_path / name)
        headers = {"Content-Type": content_type} if content_type else {}
        accepted = foreign(guarded, listener, "POST", "/v1/jobs", content=json.dumps(body), headers=headers)
        assert accepted.status_code == 200, accepted.text
        assert name in jobs(guarded)
    untyped = foreign(guarded, "herder", "POST", "/v1/jobs", content=json.dumps(herder_job("untyped", tmp_path)))
    assert untyped.status_code == 415, untyped.text


def test_refusals_are_logged_as_a_count(guarded: NomadAgent) -> None:
    def logged() -> list[str]:
        return [line for line in guarded.log.read_text().splitlines() if "cross-site" in line]

    before = len(logged())
    for _ in range(5):
        assert foreign(guarded, "herder", "GET", "/v1/jobs", headers={"Host": EVIL}).status_code == 403
    lines = logged()
    assert lines and re.search(r"refused \d+ cross-site request", lines[0]), lines
    assert len(lines) - before <= 1, lines  # a line a minute at most, whatever the number of refusals


@pytest.mark.parametrize(("host", "admitted"), [
    ("127.0.0.1:4646", True), ("127.9.9.9", True), ("LOCALHOST:1", True), ("[::1]:4646", True),
    ("10.0.0.5:4646", True), (f"{ALLOWED}:4646", True), (f"{EVIL}:4646", False), ("[::2]:4646", False),
    ("10.0.0.6", False), ("", False), ("localhost.evil.test", False)])
def test_the_host_rule(host: str, admitted: bool) -> None:
    assert Hosts("10.0.0.5", frozenset({ALLOWED}), token=True).admits(host) is admitted


def test_a_wildcard_bind_admits_any_host_only_with_a_token_and_no_list() -> None:
    assert Hosts("0.0.0.0", frozenset(), token=True).admits(f"{EVIL}:4646")
    assert Hosts("::", frozenset(), token=True).admits("192.0.2.7")
    assert not Hosts("0.0.0.0", frozenset(), token=False).admits(f"{EVIL}:4646")
    listed = Hosts("0.0.0.0", frozenset({ALLOWED}), token=True)
    assert listed.admits(ALLOWED) and listed.admits("127.0.0.1") and not listed.admits(EVIL)


# Last: against the code without its defence, the attack drains the module's agent.
def test_a_page_of_another_site_cannot_drain_the_agent(open_agent: NomadAgent, browser: WebDriver,
                                                       evil_site: FileServer) -> None:
    simple_request(browser, f"http://{EVIL}:{evil_site.port}/", open_agent.url + "/v1/agent/drain")
    with open_agent.http() as http:
        assert http.get("/v1/health").json()["status"] == "ok"
