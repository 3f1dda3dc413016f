"""A real Consul agent for tests: ``consul agent -dev`` on free loopback ports.

Uses whatever ``consul`` is on PATH (CI puts the peer programs there); without
one the tests that need it are skipped, unless ``HERDER_REQUIRE`` names consul.
"""

from __future__ import annotations

import ctypes
import random
import shutil
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.require import require
from tests.support.waiting import TIMEOUT, poll

PORT_NAMES = ("http", "dns", "serf-lan", "serf-wan", "server", "grpc")
PR_SET_PDEATHSIG = 1


def free_ports(count: int, low: int = 2000, high: int = 12000) -> list[int]:
    """``count`` distinct loopback ports nobody listens on now, from the range tests may use."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randint(low, high)
        if port in ports:
            continue
        with socket.socket() as tcp, socket.socket(type=socket.SOCK_DGRAM) as udp:
            try:
                tcp.bind(("127.0.0.1", port))
                udp.bind(("127.0.0.1", port))
            except OSError:
                continue
        ports.append(port)
    return ports


def _die_with_parent() -> None:
    """In the agent's process: stop when the test process dies, even killed outright."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def agent_ports() -> dict[str, int]:
    return dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))


def consul_binary() -> str:
    path = shutil.which("consul")
    require("consul", path is not None, "no consul on PATH")
    assert path is not None
    return path


@dataclass
class ConsulAgent:
    """One dev-mode agent; :meth:`stop` and :meth:`start` again keep its ports.

    With a ``data_dir`` it is a single server that keeps its state there, as a
    production agent does (a dev agent keeps everything in memory).
    """

    workdir: Path
    ports: dict[str, int] = field(default_factory=lambda: agent_ports())
    data_dir: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports['http']}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def start(self) -> ConsulAgent:
        mode = ["-dev"] if self.data_dir is None else \
            ["-server", "-bootstrap-expect", "1", "-data-dir", str(self.data_dir)]
        argv = [consul_binary(), "agent", *mode, "-enable-script-checks", "-client", "127.0.0.1",
                "-bind", "127.0.0.1", "-advertise", "127.0.0.1", "-disable-host-node-id", "-node", "herder-test",
                "-log-level", "warn"]
        argv += [f"-{name}-port={port}" for name, port in self.ports.items()]
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "consul.log").open("ab")
        self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                        preexec_fn=_die_with_parent)
        if poll(self._leader_or_exit, interval=0.1):
            if self.process.poll() is None:
                return self
            raise RuntimeError(f"consul exited with {self.process.returncode}: "
                               f"{(self.workdir / 'consul.log').read_text()[-2000:]}")
        self.stop()
        raise RuntimeError(f"consul did not elect itself leader within {TIMEOUT:g} s")

    def _leader_or_exit(self) -> bool:
        """Whether the agent has a leader, or has exited."""
        assert self.process is not None
        if self.process.poll() is not None:
            return True
        try:
            return bool(httpx.get(f"{self.url}/v1/status/leader", timeout=1).json())
        except (httpx.HTTPError, ValueError):
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    # -- what the agent holds -------------------------------------------------

    def services(self) -> dict[str, dict[str, object]]:
        result: dict[str, dict[str, object]] = httpx.get(f"{self.url}/v1/agent/services", timeout=5).json()
        return result

    def checks(self) -> dict[str, dict[str, object]]:
        result: dict[str, dict[str, object]] = httpx.get(f"{self.url}/v1/agent/checks", timeout=5).json()
        return result

    def catalog(self, name: str) -> list[dict[str, object]]:
        result: list[dict[str, object]] = httpx.get(f"{self.url}/v1/catalog/service/{name}", timeout=5).json()
        return result
