"""Attacks of slow or many clients on the agent: connections that send nothing (or half a request)
until its descriptors run out, and a stop that a request in progress would hold up.

The agent runs with few descriptors (256, soft and hard), so that a few hundred connections, not
the tens of thousands a service manager's limit would take, are a flood.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from herder.agent.connections import BODY_TIMEOUT
from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.waiting import TIMEOUT, wait_for

TOKEN = "Zq7-flood-token-9c2e"
NOFILE = 256
FLOOD = 400
"""Connections held open at once: more than the agent has descriptors."""
HEADERS = b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n"
"""A request's start, without the blank line that ends its headers."""


@pytest.fixture(scope="module")
def agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    process = AgentProcess(tmp_path_factory.mktemp("flood"), token=TOKEN, nofile=NOFILE)
    process.start()
    try:
        yield process
    finally:
        process.shutdown()


def half_open(agent: AgentProcess, count: int, stack: ExitStack) -> list[socket.socket]:
    """``count`` connections to the agent: of every three, one sends nothing, one half a request's
    headers, one something that is not HTTP."""
    opened = []
    for index in range(count):
        sock = stack.enter_context(socket.create_connection(("127.0.0.1", agent.port), timeout=TIMEOUT))
        sock.sendall((b"", HEADERS, b"\x16\x03\x01 not HTTP\r\n\r\n")[index % 3])
        opened.append(sock)
    return opened


def closed_by_peer(sock: socket.socket) -> bool:
    """Whether the agent closed ``sock`` (an end of file or a reset), reading what it sent first."""
    sock.settimeout(0.05)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def health(agent: AgentProcess) -> httpx.Response | None:
    try:
        return httpx.get(f"{agent.url}/v1/health", headers=agent.headers, timeout=5.0)
    except httpx.HTTPError:
        return None


def logged_since(agent: AgentProcess, seen: int, *texts: str) -> str | None:
    """What the agent logged after its first ``seen`` bytes, once that has every one of ``texts``."""
    added = agent.log.read_text()[seen:]
    return added if all(text in added for text in texts) else None


def test_a_flood_of_connections_that_send_nothing_leaves_the_api_answering(agent: AgentProcess) -> None:
    seen = agent.log.stat().st_size
    with ExitStack() as stack:
        half_open(agent, FLOOD, stack)
        answer = wait_for(lambda: health(agent), what="GET /v1/health from a fresh connection answered")
        assert answer.status_code == 200, answer.text
        added = wait_for(lambda: logged_since(agent, seen, "waiting for request headers", "not an HTTP request"),
                         what="the dropped connections counted in the agent's log")
    assert "Traceback" not in added and "Too many open files" not in added, added[:4000]
    assert len(added.splitlines()) < 10, added[:4000]


def test_a_flood_of_bodies_that_never_end_leaves_the_api_answering(agent: AgentProcess) -> None:
    """Without the token: the web UI's sign-in form reads its body before any credential is known, so
    each of these requests stays "busy" (not waiting for headers) for as long as its body goes on."""
    with ExitStack() as stack:
        for _ in range(FLOOD):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", agent.port), timeout=TIMEOUT))
            sock.sendall(b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n"
                         b"Content-Type: application/x-www-form-urlencoded\r\n\r\n6\r\ntoken=\r\n")
        answer = wait_for(lambda: health(agent), what="GET /v1/health from a fresh connection answered")
        assert answer.status_code == 200, answer.text


def resident_mib(pid: int) -> int:
    """The memory a process holds (``VmRSS``), in MiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) // 1024


def test_bodies_sent_without_the_token_are_not_held_job_sized(agent: AgentProcess) -> None:
    """The sign-in form reads its body before any credential is known: 40 connections each send a
    job-sized body (4 MiB, all but its last byte) that the agent would keep in memory, 5 MiB apiece."""
    assert agent.proc is not None
    before = resident_mib(agent.proc.pid)
    with ExitStack() as stack:
        for _ in range(40):
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", agent.port), timeout=TIMEOUT))
            sock.sendall(b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4194304\r\n"
                         b"Content-Type: application/x-www-form-urlencoded\r\n\r\n")
            with contextlib.suppress(OSError):  # refused at its headers, and closed
                sock.sendall(b"token=" + b"a" * (4194304 - 7))
        answer = wait_for(lambda: health(agent), what="GET /v1/health answered")
        grown = resident_mib(agent.proc.pid) - before
    assert answer.status_code == 200, answer.text
    assert grown < 64, f"the agent grew by {grown} MiB"


def test_a_client_slow_to_send_its_request_is_closed(agent: AgentProcess) -> None:
    """Its headers, before a first request and between two requests of a kept-alive connection (where
    uvicorn's keep-alive timeout stops once a request has begun); and its body, which the sign-in form
    reads without the token, waited for in the same time."""
    with ExitStack() as stack:
        body = stack.enter_context(socket.create_connection(("127.0.0.1", agent.port), timeout=TIMEOUT))
        body.sendall(b"POST /ui/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
                     b"Content-Type: application/x-www-form-urlencoded\r\n\r\ntoken=")
        first = stack.enter_context(socket.create_connection(("127.0.0.1", agent.port), timeout=TIMEOUT))
        first.sendall(HEADERS)
        kept = stack.enter_context(socket.create_connection(("127.0.0.1", agent.port), timeout=TIMEOUT))
        kept.sendall(HEADERS + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode())
        assert kept.recv(4096).startswith(b"HTTP/1.1 200"), "the first request of the kept-alive connection"
        kept.sendall(HEADERS)
        wait_for(lambda: closed_by_peer(first), what="the agent closing a connection without complete headers")
        wait_for(lambda: closed_by_peer(kept), what="the agent closing a kept-alive connection whose second "
                                                    "request's headers stay incomplete")
        wait_for(lambda: closed_by_peer(body), BODY_TIMEOUT + TIMEOUT,
                 what=f"the agent closing a connection whose body stays incomplete for {BODY_TIMEOUT:g} s")


def running_exec(marker: str) -> int | None:
    """The process of ``sleep MARKER``, once the agent runs it."""
    wanted = [b"sleep", marker.encode()]
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:2] == wanted:
                return int(entry.name)
        except OSError:
            continue  # it exited meanwhile
    return None


def test_sigterm_stops_the_agent_whatever_a_request_is_doing(tmp_path: Path) -> None:
    """A command run through the exec route holds a worker thread of the agent's for an hour: the
    agent still exits soon after SIGTERM (the command is this test's to kill afterwards)."""
    agent = AgentProcess(tmp_path, token=TOKEN).start()
    marker = "3599.25"
    try:
        alloc = agent.submit(ticker("slow"))["allocations"][0]["id"]
        agent.wait_task(alloc, "t")
        answered: list[httpx.Response | Exception] = []

        def exec_() -> None:
            try:
                with httpx.Client(base_url=agent.url, headers=agent.headers, timeout=None) as http:
                    answered.append(http.post(f"/v1/allocations/{alloc}/exec",
                                              json={"task": "t", "command": ["sleep", marker], "timeout": 3600}))
            except httpx.HTTPError as exc:
                answered.append(exc)

        caller = threading.Thread(target=exec_, daemon=True)
        caller.start()
        sleeper = wait_for(lambda: running_exec(marker), what="the exec's command running")
        assert agent.proc is not None
        agent.proc.send_signal(signal.SIGTERM)
        assert agent.proc.wait(TIMEOUT) == 0, agent.log.read_text()[-4000:]
        caller.join(TIMEOUT)
        assert answered and not (isinstance(answered[0], httpx.Response) and answered[0].is_success), answered
        stopped = agent.log.read_text()
        assert "exiting without waiting for 1 busy thread" in stopped and "Traceback" not in stopped, stopped
        os.kill(sleeper, signal.SIGKILL)
    finally:
        if (left := running_exec(marker)) is not None:
            os.kill(left, signal.SIGKILL)
        agent.shutdown()
