"""A real Nomad (the ``nomad`` on PATH) with herder's plugin in its ``plugin_dir``, for the tests.

Every agent listens on loopback ports in 2000-12000 and keeps its data under
the test's temp dir; :meth:`NomadCluster.close` stops every job, has the
clients collect their allocations (so Nomad unmounts its secrets dirs), and
stops the agents.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.waiting import wait_for

PLUGIN = Path(sys.executable).parent / "nomad-driver-herder"
"""The console script of herder-nomad, installed beside the tests' Python."""

_used_ports: set[int] = set()


def free_port() -> int:
    """A loopback port in 2000-12000 that nothing listens on now."""
    while True:
        port = random.randint(2000, 12000)
        if port in _used_ports:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _used_ports.add(port)
        return port


@dataclass
class Agent:
    name: str
    dir: Path
    http: int
    rpc: int
    serf: int
    args: list[str]
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    @property
    def log(self) -> Path:
        return self.dir / "agent.log"

    def start(self) -> None:
        """Start the agent and wait for its HTTP API; ports another program took meanwhile are picked anew."""
        for _ in range(3):
            (self.dir / "ports.hcl").write_text(
                f"ports {{\n  http = {self.http}\n  rpc  = {self.rpc}\n  serf = {self.serf}\n}}\n")
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    ["nomad", "agent", *self.args, "-config", str(self.dir / "agent.hcl"),
                     "-config", str(self.dir / "ports.hcl")], stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
            if wait_for(self._up_or_gone, 60, f"agent {self.name} to answer") == "up":
                return
            if "address already in use" not in self.log.read_text(errors="replace"):
                break
            self.http, self.rpc, self.serf = free_port(), free_port(), free_port()
        tail = "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-20:])
        raise AssertionError(f"nomad agent {self.name} did not start:\n{tail}")

    def _up_or_gone(self) -> str | None:
        assert self.process is not None
        if self.process.poll() is not None:
            return "gone"
        try:
            with urllib.request.urlopen(f"{self.address}/v1/agent/self", timeout=2):
                return "up"
        except (OSError, ValueError):
            return None

    def plugin_processes(self) -> list[int]:
        """The herder plugin processes this agent started (its children running ``plugins/herder``)."""
        assert self.process is not None
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                parent = int(stat.read_text().rpartition(")")[2].split()[1])
                argv = (stat.parent / "cmdline").read_bytes().split(b"\0")
                if parent == self.process.pid and any(arg.endswith(b"plugins/herder") for arg in argv):
                    found.append(int(stat.parent.name))
        return found

    def stop(self, sig: int = signal.SIGINT, timeout: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class NomadCluster:
    """Nomad agents on this machine: one dev agent, or one server and some clients."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)
    agents: list[Agent] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.plugin_dir = self.root / "plugins"
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        # Named "herder", so that the agent's `plugin "herder"` block is this plugin's configuration.
        (self.plugin_dir / "herder").symlink_to(PLUGIN)

    @property
    def server(self) -> Agent:
        return self.agents[0]

    def add(self, name: str, *, mode: str, servers: list[Agent] = (), extra: str = "",  # type: ignore[assignment]
            plugin_tables: str = "", raw_exec: bool = True) -> Agent:
        """A started agent: ``mode`` is ``dev``, ``server`` or ``client``.

        ``plugin_tables`` are more lines of the herder plugin's ``plugin = { ... }`` object.
        """
        agent_dir = self.root / name
        agent_dir.mkdir()
        agent = Agent(name=name, dir=agent_dir, http=free_port(), rpc=free_port(), serf=free_port(), args=[])
        client_block = ""
        if mode in ("client", "dev"):
            joined = ", ".join(f'"127.0.0.1:{s.rpc}"' for s in servers)
            client_block = f"""
client {{
  enabled = true
  network_interface = "lo"   # tasks' ports on loopback, as in dev mode
  {f"servers = [{joined}]" if servers else ""}
  # Nomad's own drivers are not under test: fewer fingerprints, a faster start.
  options = {{ "driver.denylist" = "docker,exec,java,qemu,mock_driver,raw_exec" }}
}}
plugin "herder" {{
  config {{
    data_dir = "{self.root / "herder" / name}"
    plugin = {{
      raw_exec = {{ enabled = {"true" if raw_exec else "false"} }}
      {plugin_tables}
    }}
  }}
}}
"""
        server_block = ""
        if mode == "server":
            server_block = "server {\n  enabled = true\n  bootstrap_expect = 1\n}\n"
        (agent_dir / "agent.hcl").write_text(f"""
name       = "{name}"
bind_addr  = "127.0.0.1"
data_dir   = "{agent_dir / "data"}"
plugin_dir = "{self.plugin_dir}"
log_level  = "DEBUG"
advertise {{
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}}
consul {{
  auto_advertise   = false
  server_auto_join = false
  client_auto_join = false
}}
disable_update_check = true
{client_block}
{server_block}
{extra}
""")
        agent.args = ["-dev"] if mode == "dev" else []
        self.agents.append(agent)
        agent.start()
        return agent

    # -- the HTTP API and the command line --------------------------------------------

    def api(self, path: str, method: str = "GET", body: Any = None, agent: Agent | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request((agent or self.server).address + path, data=data, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text else None

    def try_api(self, path: str, agent: Agent | None = None) -> Any:
        try:
            return self.api(path, agent=agent)
        except (OSError, ValueError):
            return None

    @property
    def cli_env(self) -> dict[str, str]:
        """The environment of the ``nomad`` command line, pointed at the server."""
        return {**os.environ, **self.env, "NOMAD_ADDR": self.server.address}

    def nomad(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["nomad", *args], capture_output=True, text=True, env=self.cli_env, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"nomad {' '.join(args)} exited {result.returncode}: {result.stderr}{result.stdout}")
        return result

    def wait_ready(self, clients: int = 1) -> list[dict[str, Any]]:
        """Wait for ``clients`` nodes whose herder driver is detected and healthy."""
        def ready() -> list[dict[str, Any]] | None:
            nodes = self.try_api("/v1/nodes") or []
            good = [n for n in nodes if n.get("Status") == "ready"
                    and (n.get("Drivers") or {}).get("herder", {}).get("Healthy")]
            return good if len(good) >= clients else None
        return wait_for(ready, 90, f"{clients} ready node(s) with a healthy herder driver") or []

    def run_job(self, path: Path) -> None:
        self.nomad("job", "run", "-detach", str(path))

    def allocs(self, job: str) -> list[dict[str, Any]]:
        return self.try_api(f"/v1/job/{job}/allocations") or []

    def alloc(self, alloc_id: str) -> dict[str, Any]:
        return self.api(f"/v1/allocation/{alloc_id}")  # type: ignore[no-any-return]

    def wait_alloc(self, job: str, status: str | tuple[str, ...], count: int = 1,
                   timeout: float = 90.0) -> list[dict[str, Any]]:
        """Wait for ``count`` allocations of ``job`` in client status ``status``."""
        wanted = (status,) if isinstance(status, str) else status

        def reached() -> list[dict[str, Any]] | None:
            found = [a for a in self.allocs(job) if a["ClientStatus"] in wanted]
            return found if len(found) >= count else None
        return wait_for(reached, timeout, f"{count} allocation(s) of {job} {'/'.join(wanted)}") or []

    def events(self, alloc_id: str, task: str) -> list[dict[str, Any]]:
        state = (self.alloc(alloc_id).get("TaskStates") or {}).get(task) or {}
        return state.get("Events") or []

    def logs(self, alloc_id: str, task: str, stderr: bool = False) -> str:
        args = ["alloc", "logs", *(["-stderr"] if stderr else []), alloc_id, task]
        return self.nomad(*args).stdout

    # -- leaving nothing behind -------------------------------------------------------

    def close(self) -> None:
        try:
            for job in self.try_api("/v1/jobs") or []:
                with contextlib.suppress(Exception):
                    self.nomad("job", "stop", "-purge", "-detach", job["ID"], timeout=20)
            # Wait until no allocation runs, then let each client collect its allocations:
            # that is when Nomad unmounts the secrets dirs and removes the alloc dirs.
            with contextlib.suppress(AssertionError):
                wait_for(lambda: not any(a["ClientStatus"] in ("running", "pending")
                                         for a in (self.try_api("/v1/allocations") or [])), 60, "allocs to stop")
            for agent in self.agents:
                with contextlib.suppress(Exception):
                    self.api("/v1/client/gc", method="PUT", agent=agent)
            with contextlib.suppress(AssertionError):
                wait_for(lambda: not mounts_under(self.root), 30, "Nomad to unmount its secrets dirs")
        finally:
            for agent in reversed(self.agents):
                agent.stop()


def mounts_under(path: Path) -> list[str]:
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(path))]


def unmount_under(path: Path) -> list[str]:
    """Mount points under ``path`` (what a test must not leave); each is unmounted, lazily."""
    left = mounts_under(path)
    for mount in sorted(left, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)
    return left
