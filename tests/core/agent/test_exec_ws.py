"""The exec WebSocket (``GET /v1/allocations/{id}/exec``) against a real agent and a raw_exec task,
through a real WebSocket client: Nomad's frames, stdin, resizes, the exit frame, errors, and the
session's command ended whenever the socket is."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from herder.agent.exec_ws import OUTPUT_CHUNK
from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.processes import alive
from tests.support.waiting import TIMEOUT, poll, wait_for


@pytest.fixture(scope="module")
def alloc_id(shared_agent: AgentProcess) -> str:
    submitted = shared_agent.submit(ticker("exec-ws"))
    alloc_id = str(submitted["allocations"][0]["id"])
    shared_agent.wait_task(alloc_id, "t")
    return alloc_id


def exec_url(agent: AgentProcess, alloc_id: str, command: list[str] | str, tty: bool | str = False,
             task: str | None = "t") -> str:
    params = {"command": command if isinstance(command, str) else json.dumps(command),
              "tty": tty if isinstance(tty, str) else str(tty).lower()}
    if task is not None:
        params["task"] = task
    return f"ws://127.0.0.1:{agent.port}/v1/allocations/{alloc_id}/exec?{urlencode(params)}"


def connect(agent: AgentProcess, url: str, **options: Any) -> ClientConnection:
    """A WebSocket to ``url`` on ``agent``, with its token."""
    return ws_connect(url, additional_headers=agent.headers, **options)


def exec_socket(agent: AgentProcess, alloc_id: str, command: list[str], tty: bool = False,
                **options: Any) -> ClientConnection:
    """The exec WebSocket of ``command`` in the task ``t`` of ``alloc_id``."""
    return connect(agent, exec_url(agent, alloc_id, command, tty), **options)


class Client:
    """A connected socket and what the server sent on it, frame by frame."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.frames: list[dict[str, Any]] = []
        self.output = {"stdout": bytearray(), "stderr": bytearray()}

    def send(self, frame: dict[str, Any]) -> None:
        self.connection.send(json.dumps(frame))

    def stdin(self, data: bytes) -> None:
        self.send({"stdin": {"data": base64.b64encode(data).decode()}})

    def receive(self) -> dict[str, Any]:
        frame: dict[str, Any] = json.loads(self.connection.recv(timeout=TIMEOUT))
        self.frames.append(frame)
        for stream, buffer in self.output.items():
            if stream in frame:
                buffer.extend(base64.b64decode(frame[stream]["data"]))
        return frame

    def expect(self, pattern: bytes) -> None:
        """Read frames until stdout matches ``pattern``."""
        while not re.search(pattern, self.output["stdout"]):
            assert "exited" not in self.receive(), f"exited before printing {pattern!r}: {self.output}"

    def exit_code(self) -> int:
        """Read frames to the exit frame, then the normal close; the exit code."""
        while "exited" not in (frame := self.receive()):
            pass
        with pytest.raises(ConnectionClosed) as closed:
            self.connection.recv(timeout=TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
        return int(frame["result"]["exit_code"])


@pytest.fixture
def session(shared_agent: AgentProcess, alloc_id: str) -> Iterator[Client]:
    """A shell on a terminal in the task (the subprotocol offered, as a browser does)."""
    with exec_socket(shared_agent, alloc_id, ["/bin/sh"], tty=True, subprotocols=["herder.exec"]) as ws:
        yield Client(ws)


def test_a_shell_on_a_terminal(session: Client) -> None:
    assert session.connection.subprotocol == "herder.exec"
    session.stdin(b"tty\n")
    session.expect(rb"/dev/pts/\d+")
    session.send({})  # Nomad's heartbeat: ignored
    session.stdin(b"echo $((6*7))\n")
    session.expect(rb"\b42\b")
    session.stdin(b"exit 3\n")
    assert session.exit_code() == 3


def test_a_resize_reaches_the_terminal(session: Client) -> None:
    session.send({"tty_size": {"height": 45, "width": 123}})
    session.stdin(b"stty size\n")
    session.expect(rb"\b45 123\b")
    session.stdin(b"exit\n")
    assert session.exit_code() == 0


def test_without_a_terminal_stdout_stderr_and_the_end_of_stdin(shared_agent: AgentProcess, alloc_id: str) -> None:
    script = 'read line; echo "got $line"; echo oops >&2; cat; exit 4'
    with exec_socket(shared_agent, alloc_id, ["/bin/sh", "-c", script]) as ws:
        client = Client(ws)
        assert ws.subprotocol is None  # not offered, not answered
        client.stdin(b"hello\n")
        client.expect(rb"got hello\n")
        client.stdin(b"more\n")
        client.send({"stdin": {"close": True}})  # cat ends: the command exits
        assert client.exit_code() == 4
    assert client.output == {"stdout": b"got hello\nmore\n", "stderr": b"oops\n"}


def test_output_comes_in_bounded_frames(shared_agent: AgentProcess, alloc_id: str) -> None:
    size = 5 * OUTPUT_CHUNK + 123
    with exec_socket(shared_agent, alloc_id, ["/bin/sh", "-c", f"head -c {size} /dev/zero | tr '\\0' x"]) as ws:
        client = Client(ws)
        assert client.exit_code() == 0
    assert client.output["stdout"] == b"x" * size
    sizes = [len(base64.b64decode(f["stdout"]["data"])) for f in client.frames if "stdout" in f]
    assert max(sizes) <= OUTPUT_CHUNK and len(sizes) >= 6


def _command_pid(client: Client) -> int:
    client.expect(rb"pid (\d+)\r?\n")
    match = re.search(rb"pid (\d+)\r?\n", client.output["stdout"])
    assert match is not None
    return int(match[1])


@pytest.mark.parametrize("tty", [True, False])
def test_the_command_ends_when_the_client_leaves(shared_agent: AgentProcess, alloc_id: str, tty: bool) -> None:
    with exec_socket(shared_agent, alloc_id, ["/bin/sh", "-c", "echo pid $$; exec sleep 3600"], tty) as ws:
        pid = _command_pid(Client(ws))
        assert alive(pid)
    assert poll(lambda: not alive(pid), TIMEOUT), "the command ran on after its client left"


def test_the_command_ends_when_the_client_vanishes_while_it_ignores_its_input(shared_agent: AgentProcess,
                                                                              alloc_id: str) -> None:
    """A command that reads nothing: the server's write blocks, yet it sees the socket go."""
    with exec_socket(shared_agent, alloc_id, ["/bin/sh", "-c", "echo pid $$; exec sleep 3600"]) as ws:
        client = Client(ws)
        pid = _command_pid(client)
        for _ in range(20):  # far more than a pipe holds
            client.stdin(b"y" * 60_000)
        ws.socket.close()  # no close frame: the connection is just gone
    assert poll(lambda: not alive(pid), TIMEOUT), "the command ran on after its client vanished"


def test_an_invalid_frame_closes_the_socket_and_ends_the_command(shared_agent: AgentProcess, alloc_id: str) -> None:
    with exec_socket(shared_agent, alloc_id, ["/bin/sh", "-c", "echo pid $$; exec sleep 3600"]) as ws:
        client = Client(ws)
        pid = _command_pid(client)
        client.send({"stdin": {"data": "%%% not base64"}})
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                client.receive()
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
    assert closed.value.rcvd.reason == "invalid frame: stdin.data: not base64"
    assert poll(lambda: not alive(pid), TIMEOUT)
    with exec_socket(shared_agent, alloc_id, ["cat"]) as ws:
        Client(ws).send({"tty_size": {"height": -1, "width": 80}})
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=TIMEOUT)
    assert closed.value.rcvd is not None and closed.value.rcvd.reason.startswith("invalid frame: tty_size.height")


def refusal(agent: AgentProcess, url: str) -> tuple[int, str]:
    with pytest.raises(InvalidStatus) as refused:
        connect(agent, url)
    response = refused.value.response
    return response.status_code, json.loads(bytes(response.body or b""))["error"]


def test_a_bad_request_is_refused_with_a_clear_error(shared_agent: AgentProcess, alloc_id: str) -> None:
    assert refusal(shared_agent, exec_url(shared_agent, alloc_id, ["sh"], task=None)) == (
        400, "invalid query: task: missing (the task to run the command in)")
    for command in ("ls", "[]", '["sh", 1]', '{"a": 1}'):
        status, error = refusal(shared_agent, exec_url(shared_agent, alloc_id, command))
        assert status == 400 and error.startswith("invalid query: command: expected a JSON array of strings")
    assert refusal(shared_agent, exec_url(shared_agent, alloc_id, ["sh"], tty="yes")) == (
        400, "invalid query: tty: expected true or false, not 'yes'")
    assert refusal(shared_agent, exec_url(shared_agent, "nope", ["sh"])) == (404, "no allocation with ID prefix 'nope'")
    status, error = refusal(shared_agent, exec_url(shared_agent, alloc_id, ["sh"], task="other"))
    assert status == 404 and "has no task 'other'" in error
    status, error = refusal(shared_agent, exec_url(shared_agent, alloc_id, ["/nonexistent/program"]))
    assert (status, error) == (409, "exec in t: cannot run /nonexistent/program: No such file or directory")


def test_a_task_that_is_not_running_is_refused(shared_agent: AgentProcess) -> None:
    submitted = shared_agent.submit(ticker("exec-ws-stopped"))
    stopped = str(submitted["allocations"][0]["id"])
    shared_agent.wait_task(stopped, "t")
    with shared_agent.http() as http:
        assert http.delete("/v1/jobs/exec-ws-stopped").status_code == 200
    shared_agent.wait_task(stopped, "t", "dead")
    status, error = wait_for(lambda: refusal(shared_agent, exec_url(shared_agent, stopped, ["sh"])), TIMEOUT)
    assert status == 409 and error == f"task t of {submitted['allocations'][0]['name']} is not running"
