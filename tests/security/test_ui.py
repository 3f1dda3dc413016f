"""Attacks on the web UI at ``/ui/`` (SPEC §14, §16).

The UI shows what jobs' authors and tasks wrote (log lines, event messages), is reachable by any web
page the operator's browser opens, and stands in for the token. So: hostile text is shown escaped and
no inline script runs (Content-Security-Policy); a form posted from another site, or without the
session's CSRF token, does nothing; with a token, nothing but the login form answers without a
session the token opened (its URL prefix and its cookie, both), signing out ends a session for every
copy of it, the API itself still wants the token, and the token never appears in a URL, a page or the
cookie.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import itsdangerous
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.support.agent import AgentProcess
from tests.support.tls import make_certificates
from tests.support.waiting import wait_for

TOKEN = "ui-s3cret-7f3a9c"
HOSTILE = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert("

JOB = """
job "{name}" {{
  group "g" {{
    task "t" {{
      driver = "raw_exec"
      config {{
        command = "/bin/sh"
        args    = ["-c", "echo '{hostile}'; echo '{hostile}' >&2; exec sleep 3600"]
      }}
      kill_timeout = "5s"
    }}
  }}
}}
"""

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def job(name: str) -> str:
    return JOB.format(name=name, hostile=HOSTILE)


SESSION_KEY = hmac.new(TOKEN.encode(), b"herder ui session", hashlib.sha256).hexdigest()
"""The key that signs the UI's session cookies, derived from the token."""


def session_cookie(key: str, session: dict[str, Any]) -> str:
    """A session cookie signed with ``key``, that holds ``session``."""
    return itsdangerous.TimestampSigner(key).sign(base64.b64encode(json.dumps(session).encode())).decode()


def csrf_of(page: str) -> str:
    found = CSRF.search(page)
    assert found, page
    return found[1]


def browser(agent: AgentProcess) -> httpx.Client:
    """A client that says where it comes from, as a browser does on a POST: the UI's own origin."""
    return httpx.Client(base_url=agent.url, headers={"Origin": agent.url}, timeout=30.0)


def signed_in(agent: AgentProcess) -> httpx.Client:
    """A browser signed in, based at its session's pages (``/ui/s/<secret>/``)."""
    return agent.sign_in(browser(agent))


def prefix(client: httpx.Client) -> str:
    """The URL prefix of a signed-in client's session: ``/ui/s/<secret>``."""
    return client.base_url.path.rstrip("/")


def secret_of(client: httpx.Client) -> str:
    return prefix(client).rpartition("/")[2]


def cookie_of(client: httpx.Client) -> dict[str, str]:
    return {"Cookie": f"herder_ui={client.cookies['herder_ui']}"}


def raw_get(agent: AgentProcess, target: str) -> tuple[int, bytes]:
    """``GET target`` sent as is (an HTTP client would resolve the ``..`` in it first)."""
    with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1]), answer


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path_factory.mktemp("ui"), token=TOKEN).start()
    try:
        yield process
    finally:
        process.shutdown()


@pytest.fixture(scope="module")
def alloc(agent: AgentProcess) -> str:
    """The running allocation of job ``web``, whose task wrote :data:`HOSTILE` on both streams."""
    alloc_id = str(agent.submit(job("web"))["allocations"][0]["id"])
    agent.wait_task(alloc_id, "t")
    with agent.http() as http:
        for stream in ("stdout", "stderr"):
            wait_for(lambda s=stream: HOSTILE in http.get(f"/v1/allocations/{alloc_id}/logs/t",  # type: ignore[misc]
                                                          params={"stream": s}).text, what=f"the {stream} line")
    return alloc_id


def test_hostile_text_is_shown_escaped_and_no_inline_script_runs(agent: AgentProcess, alloc: str) -> None:
    # An event message that anyone with the API can set: a restart's reason.
    with agent.http() as http:
        assert http.post(f"/v1/allocations/{alloc}/restart", json={"task": "t", "reason": HOSTILE}).status_code == 200
    agent.wait_event(alloc, "t", "Restart Signal")
    client = signed_in(agent)
    pages = [f"/allocations/{alloc}", f"/allocations/{alloc}?fragment=tasks",
             f"/allocations/{alloc}/logs/t?stream=stdout", f"/allocations/{alloc}/logs/t?stream=stderr"]
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, (page, response.text)
        assert ESCAPED in response.text, page  # shown, as text
        assert "<script>alert" not in response.text, page
        policy = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy and "default-src 'none'" in policy
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        # Every script is a file of the UI's own: nothing inline that the policy would have to allow.
        assert all('src="/ui/static/' in tag for tag in re.findall(r"<script[^>]*>", response.text)), page

    # Reflected: a form's value that the API's refusal repeats, shown on the next page.
    page = client.get(f"/allocations/{alloc}")
    refused = client.post(f"/allocations/{alloc}/signal",
                          data={"csrf": csrf_of(page.text), "task": "t", "signal": HOSTILE})
    assert refused.status_code == 303
    shown = client.get(agent.url + refused.headers["location"]).text
    assert "unknown signal" in shown and ESCAPED in shown and "<script>alert" not in shown


def test_a_form_from_another_site_or_without_its_token_does_nothing(agent: AgentProcess) -> None:
    agent.submit(job("victim"))
    client = signed_in(agent)
    csrf = csrf_of(client.get("/jobs/victim").text)
    stop = f"{client.base_url}jobs/victim/stop"
    attempts = [
        ({"Origin": "http://evil.example"}, {"csrf": csrf}),  # another site, even with the token of the form
        ({"Origin": "null"}, {"csrf": csrf}),  # a sandboxed frame
        ({"Origin": "", "Referer": "http://evil.example/page"}, {"csrf": csrf}),
        ({}, {}),  # the UI's origin, without the form's token
        ({}, {"csrf": csrf_of(browser(agent).get("/ui/login").text)}),  # another session's token
    ]
    for headers, form in attempts:
        response = client.post(stop, data=form, headers=headers)
        assert response.status_code == 403, (headers, form, response.status_code)
    # Without the session cookie (a cross-site request: SameSite=Strict withholds it), not even signed in.
    outsider = browser(agent).post(stop, data={"csrf": csrf})
    assert outsider.status_code == 401 and 'name="token"' in outsider.text
    with agent.http() as http:
        assert http.get("/v1/jobs/victim").json()["status"] == "running"

    # The control: the form as the UI serves it stops the job.
    assert client.post(stop, data={"csrf": csrf}).status_code == 303
    with agent.http() as http:
        wait_for(lambda: http.get("/v1/jobs/victim").json()["status"] != "running", what="victim stopped")


def test_nothing_but_the_login_answers_without_a_session(agent: AgentProcess, alloc: str) -> None:
    owner = signed_in(agent)
    home = str(owner.base_url)  # the session's own pages, /ui/s/<secret>/
    pages = ["", "jobs/web", f"allocations/{alloc}", f"allocations/{alloc}/logs/t", f"allocations/{alloc}/tasks/t/exec"]
    fragments = ["?fragment=jobs", f"allocations/{alloc}?fragment=tasks", f"allocations/{alloc}?fragment=stats",
                 "jobs/web?fragment=job"]
    streams = ["stream/events?follow=false", f"stream/allocations/{alloc}/logs/t"]
    before_login = browser(agent)
    before_login.get("/ui/login")  # a session, with a CSRF token, that never gave the token
    strangers = [browser(agent), before_login]
    # Forged: the session's secret in a cookie signed with another key; one signed with the key (of a
    # token that leaked, since changed) for a secret that no sign-in gave.
    for key, secret in (("not the key", secret_of(owner)), (SESSION_KEY, "made-up")):
        strangers.append(browser(agent))
        strangers[-1].cookies.set("herder_ui", session_cookie(key, {"secret": secret}), domain="127.0.0.1",
                                  path="/ui/")
    wrong = browser(agent)
    assert wrong.post("/ui/login", data={"csrf": csrf_of(wrong.get("/ui/login").text), "token": "guess"}
                      ).status_code == 401
    strangers.append(wrong)
    other = signed_in(agent)  # another session: its cookie does not open this one's pages
    strangers.append(browser(agent))
    strangers[-1].cookies.set("herder_ui", other.cookies["herder_ui"], domain="127.0.0.1", path="/ui/")
    # (the control: the owner's cookie, copied, opens its pages)
    assert browser(agent).get(home, headers=cookie_of(owner)).status_code == 200
    for client in strangers:
        # The session's pages, and the same pages outside a session (bookmarked, or linked by anyone).
        for url in [home + page for page in pages] + [f"/ui/{page}" for page in pages]:
            response = client.get(url)  # the form that asks for the token, instead
            assert response.status_code == 401 and 'name="token"' in response.text, url
            then = "/" + url.removeprefix(home).removeprefix("/ui/")
            shown = response.text.replace(f'value="{then}"', "")  # (the page asked for, to go back to)
            assert alloc not in shown and "web" not in shown
        for url in fragments + streams:
            response = client.get(home + url)
            assert response.status_code == 401, url
            assert alloc not in response.text and HOSTILE not in response.text

    # A session opens the UI, not the API: the API wants the token, even beside the cookie, and under /ui/.
    api = httpx.get(f"{agent.url}/v1/jobs", headers=cookie_of(owner))
    assert api.status_code == 401
    for target in ("/ui/../v1/jobs", "/ui/%2e%2e/v1/jobs", "/ui//v1/jobs", f"{prefix(owner)}/stream/jobs",
                   f"{prefix(owner)}/stream/allocations/{alloc}/stats", f"{prefix(owner)}/../../../v1/jobs"):
        status, answer = raw_get(agent, target)
        assert status in (401, 404), (target, answer)
        assert b"web" not in answer.partition(b"\r\n\r\n")[2], target


def test_the_token_is_never_in_a_url_a_page_or_the_cookie(agent: AgentProcess, alloc: str) -> None:
    client = browser(agent)
    form = client.get("/ui/login").text
    assert re.search(r'<form method="post" action="/ui/login"', form)
    assert 'type="password"' in form
    # Only the form's body is read: a token in the query string opens nothing.
    assert client.post(f"/ui/login?token={TOKEN}", data={"csrf": csrf_of(form)}).status_code == 401
    # Signed in, the form goes back to the UI's page it was asked for, never to another site.
    for then in ("https://evil.example/", "//evil.example/ui/", "/ui/../v1/jobs"):
        other = browser(agent)
        response = other.post("/ui/login", data={"csrf": csrf_of(other.get("/ui/login").text), "token": TOKEN,
                                                  "then": then})
        assert response.status_code == 303 and re.fullmatch(r"/ui/s/[\w-]+/(ui/\.\./v1/jobs)?",
                                                              response.headers["location"]), then
    response = client.post("/ui/login", data={"csrf": csrf_of(form), "token": TOKEN, "then": "/jobs/web"})
    location = response.headers["location"]
    assert response.status_code == 303 and re.fullmatch(r"/ui/s/[\w-]{32}/jobs/web", location), location
    session = location.removesuffix("jobs/web")
    # The session's cookie, sent only under its pages; the login form's, of its CSRF token, ended.
    cookies = {cookie.split(";")[0].split("=", 1)[1] != "": cookie
               for cookie in response.headers.get_list("set-cookie")}
    flags = [flag.strip().lower() for flag in cookies[True].split(";")[1:]]
    assert {"httponly", "samesite=strict", f"path={session.lower()}"} <= set(flags), cookies
    assert "path=/ui/login" in cookies[False].lower() and "expires=thu, 01 jan 1970" in cookies[False].lower()
    value = client.cookies["herder_ui"]
    payload = base64.b64decode(value.split(".")[0] + "==")
    assert TOKEN not in value and TOKEN.encode() not in payload
    for url in ("", "jobs/web", f"allocations/{alloc}", f"allocations/{alloc}/logs/t",
                f"allocations/{alloc}?fragment=tasks"):
        page = client.get(session + url)
        assert page.status_code == 200 and TOKEN not in page.text, url
        assert all(TOKEN not in link for link in re.findall(r'(?:href|action|src|data-[a-z]+)="([^"]*)"', page.text))


def test_without_a_token_no_login_but_forms_still_need_the_session(tmp_path: Path) -> None:
    """A loopback agent without a token: the UI needs no login, yet another site's page still cannot act."""
    agent = AgentProcess(tmp_path, extra="[agent]\ninsecure_no_token = true\n").start()
    try:
        agent.submit(job("open"))
        client = browser(agent)
        opened = client.get("/ui/jobs/open")  # a session, at once: its secret prefix and cookie
        assert opened.status_code == 303 and re.fullmatch(r"/ui/s/[\w-]+/jobs/open", opened.headers["location"])
        session = opened.headers["location"].removesuffix("/jobs/open")
        page = client.get(opened.headers["location"])
        assert page.status_code == 200 and "Stop job" in page.text
        refused = client.post(f"{session}/jobs/open/stop", data={"csrf": csrf_of(page.text)},
                              headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403
        # Without the session's cookie: a session of its own, and no action.
        alone = httpx.Client(base_url=agent.url).post(f"{session}/jobs/open/stop", data={})
        assert alone.status_code == 303 and not alone.headers["location"].endswith("/stop")
        with agent.http() as http:
            assert http.get("/v1/jobs/open").json()["status"] == "running"

        # Its terminal: no session needed, but a page of another site still cannot open it, nor one of a
        # site whose name was made to resolve to 127.0.0.1 (DNS rebinding: its Origin matches its Host).
        alloc = str(agent.submit(job("shell"))["allocations"][0]["id"])
        agent.wait_task(alloc, "t")
        marker = tmp_path / "ran"
        url = terminal_socket(agent, alloc, marker, session)
        cookie = {"Cookie": f"herder_ui={client.cookies['herder_ui']}"}
        assert socket_refused(url, marker, {**cookie, "Origin": "http://evil.example"}) == 403
        rebound = url.replace("127.0.0.1", "evil.example")
        with pytest.raises(InvalidStatus) as refused:  # the name resolved to the agent: its Host is evil.example
            connect(rebound, sock=socket.create_connection(("127.0.0.1", agent.port), timeout=30),
                    additional_headers={**cookie, "Origin": f"http://evil.example:{agent.port}"}, open_timeout=30)
        assert refused.value.response.status_code == 403 and not marker.exists()
        with connect(url, additional_headers={**cookie, "Origin": agent.url}, open_timeout=30) as ws:
            while "exited" not in json.loads(ws.recv(timeout=30)):
                pass
        assert marker.exists()  # (the control)
    finally:
        agent.shutdown()


def test_over_tls_the_cookie_is_sent_over_tls_only(tmp_path: Path) -> None:
    agent = AgentProcess(tmp_path, token=TOKEN, tls=make_certificates(tmp_path / "certs")).start()
    try:
        with httpx.Client(base_url=agent.url, verify=agent.verify, headers={"Origin": agent.url}) as client:
            form = client.get("/ui/login")
            response = client.post("/ui/login", data={"csrf": csrf_of(form.text), "token": TOKEN})
            assert response.status_code == 303
            for cookie in response.headers.get_list("set-cookie"):
                assert "secure" in [flag.strip().lower() for flag in cookie.split(";")], cookie
    finally:
        agent.shutdown()


def terminal_socket(agent: AgentProcess, alloc: str, marker: Path, session: str) -> str:
    """The URL of the terminal page's WebSocket in ``session`` (its prefix), for a command that creates
    ``marker``."""
    query = urlencode({"task": "t", "tty": "true",
                       "command": json.dumps(["/bin/sh", "-c", f"touch {marker}; echo ran"])})
    return f"ws://127.0.0.1:{agent.port}{session}/ws/allocations/{alloc}/exec?{query}"


def socket_refused(url: str, marker: Path, headers: dict[str, str]) -> int:
    """The status the handshake was refused with; the command never ran."""
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers=headers, open_timeout=30)
    assert not marker.exists(), "the command ran although the handshake was refused"
    return refused.value.response.status_code


def test_the_terminal_socket_needs_the_session_and_the_uis_origin(agent: AgentProcess, alloc: str,
                                                                  tmp_path: Path) -> None:
    # A browser sends the cookie with a WebSocket handshake that a page of any site opens, to any address:
    # the terminal's socket runs commands in tasks (as root, for raw_exec).
    marker = tmp_path / "ran"
    client = signed_in(agent)
    url = terminal_socket(agent, alloc, marker, prefix(client))
    own = {"Origin": agent.url}
    session = cookie_of(client)
    attempts: list[tuple[dict[str, Any], int]] = [
        (own, 401),  # no session
        ({**own, "Cookie": "herder_ui=" + session_cookie("not the key", {"secret": secret_of(client)})}, 401),
        ({**own, **cookie_of(signed_in(agent))}, 401),  # another session's cookie
        ({**own, "Cookie": "herder_ui=" + browser(agent).get("/ui/login").cookies["herder_ui"]}, 401),  # no login
        ({**session, "Origin": "http://evil.example"}, 403),  # cross-site WebSocket hijacking
        ({**session, "Origin": "null"}, 403),  # a sandboxed frame
        (session, 403),  # no Origin: not the UI's page, whose browser always says where it comes from
        ({**own, "Authorization": f"Bearer {TOKEN}"}, 401),  # the UI's socket takes the session, not the token
    ]
    for headers, status in attempts:
        assert socket_refused(url, marker, headers) == status, headers
    # Only the API's exec route is reachable that way, and a session does not open the API's own socket.
    for other in ("/ws/events", f"/ws/allocations/{alloc}/logs/t", "/ws/allocations/x/../../v1/jobs"):
        assert socket_refused(f"ws://127.0.0.1:{agent.port}{prefix(client)}{other}", marker,
                              {**session, **own}) == 404, other
    api = url.replace(f"{prefix(client)}/ws/", "/v1/")
    assert socket_refused(api, marker, {**session, **own}) == 401

    # The control: the session, from the UI's own page, runs the command.
    with connect(url, additional_headers={**session, **own}, open_timeout=30) as ws:
        output = b""
        while "exited" not in (frame := json.loads(ws.recv(timeout=30))):
            output += base64.b64decode(frame.get("stdout", {}).get("data", ""))
        assert frame["result"]["exit_code"] == 0 and b"ran" in output
    assert marker.exists()


def test_signing_out_ends_the_session_for_every_copy_of_it(agent: AgentProcess) -> None:
    """A session's URL and cookie, copied (from a shared screen, a proxy's log, a browser profile), open
    nothing once its owner signed out."""
    client = signed_in(agent)
    copy = {"url": str(client.base_url), **cookie_of(client)}
    assert browser(agent).get(copy["url"], headers={"Cookie": copy["Cookie"]}).status_code == 200  # (control)
    out = client.post("/logout", data={"csrf": csrf_of(client.get("/").text)})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert "signed out" in client.get(agent.url + "/ui/login").text
    replayed = browser(agent).get(copy["url"], headers={"Cookie": copy["Cookie"]})
    assert replayed.status_code == 401 and 'name="token"' in replayed.text
    # A bookmark of the ended session's page, in the browser that still holds its cookie: the token is
    # asked again, and the page shown in a new session.
    stale = browser(agent)
    stale.cookies.set("herder_ui", copy["Cookie"].partition("=")[2], domain="127.0.0.1", path=prefix(client) + "/")
    form = stale.get(copy["url"] + "jobs/web")
    assert form.status_code == 401 and 'name="then" value="/jobs/web"' in form.text
    again = stale.post("/ui/login", data={"csrf": csrf_of(form.text), "token": TOKEN, "then": "/"})
    assert again.status_code == 303
    assert not again.headers["location"].startswith(prefix(client))
    assert stale.get(agent.url + again.headers["location"]).status_code == 200
