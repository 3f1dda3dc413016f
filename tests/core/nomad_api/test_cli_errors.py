"""Errors as Nomad's command line prints them (SPEC §17): a refusal is its message in plain text, and
``alloc exec -i -t`` on a terminal of no size works as against Nomad."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlencode

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.core.nomad_api.conftest import NomadAgent
from tests.core.nomad_api.test_cli import running_alloc, service, stop
from tests.support.terminal import Terminal
from tests.support.waiting import TIMEOUT

pytestmark = pytest.mark.slow


def test_a_refused_exec_is_the_message_in_plain_text(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ran = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "refusing")))
    assert ran.returncode == 0, ran.stderr
    alloc = running_alloc(nomad_agent, "refusing")
    query = urlencode({"task": "t", "command": json.dumps(["/no/such/program"]), "tty": "false"})
    url = f"ws://127.0.0.1:{nomad_agent.nomad_port}/v1/client/allocation/{alloc}/exec?{query}"
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers={"X-Nomad-Token": nomad_agent.token})
    response = refused.value.response
    body = bytes(response.body or b"").decode()
    assert response.status_code == 409 and response.headers["Content-Type"].startswith("text/plain"), body
    assert body.startswith("exec in t: ") and not body.startswith("{"), body

    missing = nomad_agent.nomad("alloc", "exec", "-task", "t", alloc, "/no/such/program")
    assert missing.returncode == 1 and "409 (exec in t: " in missing.stderr, missing.stderr
    assert '{"error"' not in missing.stderr
    stop(nomad_agent, "refusing")


def test_exec_on_a_terminal_of_no_size(nomad_agent: NomadAgent, tmp_path: Path) -> None:
    ran = nomad_agent.nomad("job", "run", "-detach", str(service(tmp_path, "sizeless")))
    assert ran.returncode == 0, ran.stderr
    alloc = running_alloc(nomad_agent, "sizeless")
    env = {**os.environ, "NOMAD_ADDR": nomad_agent.nomad_url, "NOMAD_TOKEN": nomad_agent.token, "NO_COLOR": "1"}
    shell = Terminal(["nomad", "alloc", "exec", "-i", "-t", "-task", "t", alloc, "/bin/sh"], env)
    try:
        shell.set_size(0, 0)  # SIGWINCH: nomad sends {"tty_size": {}}, Go leaving out the zeros
        shell.type(b"echo $((6*7))\n")
        shell.expect(rb"\b42\b")
        shell.type(b"exit 3\n")
        assert shell.proc.wait(TIMEOUT) == 3, bytes(shell.output)
    finally:
        shell.close()
    stop(nomad_agent, "sizeless")
