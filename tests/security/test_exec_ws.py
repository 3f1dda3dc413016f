"""Security: the exec WebSocket runs commands in tasks, as root for a raw_exec task. Its handshake is
refused before anything runs without the agent's token (as a header, or offered as a subprotocol by a
browser), and a page of another site cannot open it, even on an agent without a token: a browser
opens WebSockets to 127.0.0.1 from any page (cross-site WebSocket hijacking), and a site's name can be
made to resolve to 127.0.0.1 (DNS rebinding)."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.waiting import wait_for

TOKEN = "exec-s3cret"


def _running(agent: AgentProcess, name: str) -> str:
    alloc_id = str(agent.submit(ticker(name))["allocations"][0]["id"])
    agent.wait_task(alloc_id, "t")
    return alloc_id


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentProcess, str]]:
    agent = AgentProcess(tmp_path_factory.mktemp("guarded"), token=TOKEN).start()
    try:
        yield agent, _running(agent, "exec-guarded")
    finally:
        agent.shutdown()


@pytest.fixture(scope="module")
def open_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentProcess, str]]:
    agent = AgentProcess(tmp_path_factory.mktemp("open"), extra="[agent]\ninsecure_no_token = true\n").start()
    try:
        yield agent, _running(agent, "exec-open")
    finally:
        agent.shutdown()


def _path(alloc_id: str, marker: Path) -> str:
    query = urlencode({"task": "t", "command": json.dumps(["/bin/sh", "-c", f"touch {marker}; echo ran"])})
    return f"/v1/allocations/{alloc_id}/exec?{query}"


def _ran(agent: AgentProcess, alloc_id: str, marker: Path, **options: Any) -> None:
    """Open the socket with ``options``; the command must run (a control for each refusal)."""
    with connect(f"ws://127.0.0.1:{agent.port}{_path(alloc_id, marker)}", **options) as ws:
        wait_for(lambda: "exited" in json.loads(ws.recv(timeout=30)), what="the exit frame")
    assert marker.exists()


def _refused(url: str, marker: Path, **options: Any) -> int:
    """The status the handshake was refused with; the command never ran."""
    with pytest.raises(InvalidStatus) as refused:
        connect(url, **options)
    assert not marker.exists(), "the command ran although the handshake was refused"
    return refused.value.response.status_code


def _offer(token: str) -> list[Any]:
    return ["herder.exec", "herder.token." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")]


def test_without_the_token_the_handshake_is_refused_and_nothing_runs(guarded: tuple[AgentProcess, str],
                                                                      tmp_path: Path) -> None:
    agent, alloc_id = guarded
    marker = tmp_path / "ran"
    url = f"ws://127.0.0.1:{agent.port}{_path(alloc_id, marker)}"
    assert _refused(url, marker) == 401
    for wrong in ("Bearer wrong", TOKEN, f"Basic {TOKEN}"):
        assert _refused(url, marker, additional_headers={"Authorization": wrong}) == 401
    # The refused commands would have run by the time an accepted one did.
    control = tmp_path / "control"
    _ran(agent, alloc_id, control, additional_headers={"Authorization": f"Bearer {TOKEN}"})
    assert not marker.exists()


def test_a_wrong_token_offered_as_a_subprotocol_is_refused(guarded: tuple[AgentProcess, str],
                                                            tmp_path: Path) -> None:
    agent, alloc_id = guarded
    marker = tmp_path / "ran"
    url = f"ws://127.0.0.1:{agent.port}{_path(alloc_id, marker)}"
    for offer in (_offer("wrong"), _offer(TOKEN + "x"), ["herder.exec", "herder.token.%%%"], ["herder.exec"]):
        assert _refused(url, marker, subprotocols=offer) == 401
    control = tmp_path / "control"
    with connect(f"ws://127.0.0.1:{agent.port}{_path(alloc_id, control)}", subprotocols=_offer(TOKEN)) as ws:
        assert ws.subprotocol == "herder.exec"
        wait_for(lambda: "exited" in json.loads(ws.recv(timeout=30)), what="the exit frame")
    assert control.exists() and not marker.exists()


def test_a_page_of_another_site_cannot_open_it(open_agent: tuple[AgentProcess, str], tmp_path: Path) -> None:
    agent, alloc_id = open_agent
    marker = tmp_path / "ran"
    url = f"ws://127.0.0.1:{agent.port}{_path(alloc_id, marker)}"
    for origin in ("http://evil.example", f"http://127.0.0.1:{agent.port + 1}", "null",
                   f"https://127.0.0.1:{agent.port}"):
        assert _refused(url, marker, origin=origin) == 403
    # The agent's own page (its UI) and a client that sends no Origin (the command line) may.
    _ran(agent, alloc_id, tmp_path / "own", origin=f"http://127.0.0.1:{agent.port}")
    _ran(agent, alloc_id, tmp_path / "cli")
    assert not marker.exists()


def test_a_site_rebound_to_loopback_cannot_open_it(open_agent: tuple[AgentProcess, str], tmp_path: Path) -> None:
    """evil.example resolved to 127.0.0.1: the browser sends Host and Origin evil.example, which agree."""
    agent, alloc_id = open_agent
    marker = tmp_path / "ran"
    site = f"evil.example:{agent.port}"
    with pytest.raises(InvalidStatus) as refused, socket.create_connection(("127.0.0.1", agent.port)) as sock:
        connect(f"ws://{site}{_path(alloc_id, marker)}", sock=sock, origin=f"http://{site}")  # type: ignore[arg-type]
    assert refused.value.response.status_code == 403
    _ran(agent, alloc_id, tmp_path / "control", origin=f"http://127.0.0.1:{agent.port}")
    assert not marker.exists()
