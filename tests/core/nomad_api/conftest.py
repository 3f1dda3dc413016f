"""An agent with its Nomad-compatible listener, and the real ``nomad`` command line against it."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.agent import AgentProcess
from tests.support.consul import free_ports
from tests.support.require import require


class NomadAgent(AgentProcess):
    """An agent whose ``[nomad_api]`` listens on a free port of its own."""

    def __init__(self, root: Path, *, token: str = "", extra: str = "") -> None:
        self.nomad_port = free_ports(1, low=2000, high=12000)[0]
        root.mkdir(parents=True, exist_ok=True)
        super().__init__(root, token=token, extra=f'[nomad_api]\nbind = "127.0.0.1:{self.nomad_port}"\n{extra}')

    @property
    def nomad_url(self) -> str:
        return f"http://127.0.0.1:{self.nomad_port}"

    def nomad_http(self, token: str | None = None) -> httpx.Client:
        token = self.token if token is None else token
        return httpx.Client(base_url=self.nomad_url, timeout=60.0,
                            headers={"X-Nomad-Token": token} if token else {})

    def nomad(self, *args: str, token: str | None = None, cwd: Path | None = None,
              timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """``nomad ARGS...`` (the real command line) against this agent's Nomad-compatible API."""
        env = {**os.environ, "NOMAD_ADDR": self.nomad_url, "NOMAD_TOKEN": self.token if token is None else token,
               "NO_COLOR": "1"}
        return subprocess.run(["nomad", *args], capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def get(self, path: str, **params: Any) -> Any:
        with self.nomad_http() as http:
            response = http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()


def require_nomad() -> None:
    require("nomad", shutil.which("nomad") is not None, "no nomad on PATH (the real Nomad command line is the client)")


@pytest.fixture(scope="module")
def nomad_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NomadAgent]:
    """One agent for the module's tests (each uses jobs of its own names)."""
    require_nomad()
    agent = NomadAgent(tmp_path_factory.mktemp("nomad-api"))
    agent.start()
    try:
        yield agent
    finally:
        agent.shutdown()
