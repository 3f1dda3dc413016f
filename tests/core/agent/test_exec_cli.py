"""``herder alloc exec`` on a real pseudo-terminal (its controlling terminal, as in a shell) against a
real agent and a raw_exec task: a shell in the task, window size changes, the exit code, the local
terminal restored; and without a terminal, stdin from a pipe."""

from __future__ import annotations

import os
import sys
import termios
from collections.abc import Iterator

import pytest

from tests.core.agent.conftest import ticker
from tests.support.agent import AgentProcess
from tests.support.terminal import Terminal
from tests.support.waiting import TIMEOUT

# An agent and the command line on a pseudo-terminal, as subprocesses: on the first Python only.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def alloc_id(shared_agent: AgentProcess) -> str:
    submitted = shared_agent.submit(ticker("exec-cli"))
    alloc_id = str(submitted["allocations"][0]["id"])
    shared_agent.wait_task(alloc_id, "t")
    return alloc_id


def herder(agent: AgentProcess, *args: str) -> Terminal:
    """``herder ARGS...`` against ``agent``, on a terminal of its own."""
    return Terminal([sys.executable, "-m", "herder", *args],
                    {**os.environ, "HERDER_ADDR": agent.url, "HERDER_TOKEN": agent.token})


@pytest.fixture
def shell(shared_agent: AgentProcess, alloc_id: str) -> Iterator[Terminal]:
    terminal = herder(shared_agent, "alloc", "exec", alloc_id[:8], "t", "/bin/sh")
    try:
        yield terminal
    finally:
        terminal.close()


def test_a_shell_in_the_task_on_the_local_terminal(shell: Terminal) -> None:
    shell.type(b"tty\n")
    shell.expect(rb"/dev/pts/\d+")
    shell.type(b"echo $((6*7))\n")
    shell.expect(rb"\b42\b")

    shell.set_size(45, 123)  # SIGWINCH to the command line, which passes the size on

    def resized() -> bool:
        shell.type(b"stty size\n")
        return shell.shows(rb"\b45 123\b", 1.0)

    assert any(resized() for _ in range(int(TIMEOUT))), f"no resize: {bytes(shell.output)!r}"
    assert termios.tcgetattr(shell.slave)[3] & termios.ECHO == 0, "the local terminal is not in raw mode"

    shell.type(b"exit 3\n")
    assert shell.proc.wait(TIMEOUT) == 3
    assert termios.tcgetattr(shell.slave) == shell.initial, "the local terminal was not restored"


def test_the_terminal_is_restored_when_the_command_line_is_terminated(shell: Terminal) -> None:
    shell.type(b"echo $((6*7))\n")
    shell.expect(rb"\b42\b")
    shell.proc.terminate()
    assert shell.proc.wait(TIMEOUT) == 128 + 15
    assert termios.tcgetattr(shell.slave) == shell.initial, "the local terminal was not restored"


def test_stdin_from_a_pipe_and_the_only_task(shared_agent: AgentProcess, alloc_id: str) -> None:
    piped = shared_agent.cli("alloc", "exec", alloc_id[:8], "sh", "-c", "tr a-z A-Z; echo err >&2; exit 5",
                             input="hello\n")
    assert (piped.returncode, piped.stdout, piped.stderr) == (5, "HELLO\n", "err\n")


def test_without_stdin_nor_terminal_the_command_runs_to_its_end(shared_agent: AgentProcess, alloc_id: str) -> None:
    ran = shared_agent.cli("alloc", "exec", "-i=false", "-t=false", "--timeout", "1", alloc_id[:8], "t", "--",
                           "sh", "-c", "cat; sleep 60", input="ignored\n")
    assert ran.returncode == 1 and "timed out" in ran.stderr and ran.stdout == ""
