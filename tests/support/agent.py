"""``herder agent`` in a subprocess on a loopback port, and the command line against it."""

from __future__ import annotations

import os
import re
import resource
import signal
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.support.consul import free_ports
from tests.support.tls import Certificates
from tests.support.waiting import TIMEOUT, poll, wait_for


class AgentProcess:
    """An agent on its own data dir under ``root``, listening on a free port in 2000-12000.

    Tasks outlive the agent by design, so :meth:`shutdown` drains it: every
    task is stopped before the agent exits. With ``tls`` it serves HTTPS with
    that certificate, and the test's clients trust that CA only. Without a
    ``token`` the agent makes its own, which :attr:`token` is once it started
    (unless ``extra`` sets ``[agent] insecure_no_token``). With ``nofile`` the agent may
    open at most that many files (soft and hard ``RLIMIT_NOFILE``), as under a tight service manager.
    """

    def __init__(self, root: Path, *, token: str = "", host: str = "127.0.0.1", extra: str = "",
                 raw_exec: bool = True, tls: Certificates | None = None, nofile: int | None = None) -> None:
        self.root = root
        self.data_dir = root / "data"
        self.token = token
        self.token_file = self.data_dir / "agent.token"
        self.host = host
        self.tls = tls
        self.nofile = nofile
        self.config = root / "agent.toml"
        self.port = 0
        lines = [f'data_dir = "{self.data_dir}"', f'token = "{token}"', "[ports]", "min = 2000", "max = 12000"]
        if raw_exec:
            lines += ["[plugin.raw_exec]", "enabled = true"]
        if tls is not None:
            lines += ["[tls]", f'cert_file = "{tls.cert}"', f'key_file = "{tls.key}"']
        self.config.write_text("\n".join(lines) + "\n" + extra)
        self.proc: subprocess.Popen[str] | None = None
        self.log = root / "agent.log"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        return self.tls.client_context() if self.tls else True

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def http(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.headers, timeout=30.0, verify=self.verify, **kwargs)

    def sign_in(self, client: httpx.Client) -> httpx.Client:
        """``client``, a browser's cookies, signed in to the web UI with the token, as a person would, and
        based at its session's pages (``/ui/s/<secret>``)."""
        form = client.get(f"{self.url}/ui/login")
        if form.status_code != 303:  # an agent without a token asks for none
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
            assert csrf, form.text
            form = client.post(f"{self.url}/ui/login", data={"csrf": csrf[1], "token": self.token},
                               headers={"Origin": self.url})
        assert form.status_code == 303, form.text
        client.base_url = httpx.URL(self.url + form.headers["location"].rstrip("/"))
        return client

    def start(self, *args: str, timeout: float = 120.0) -> AgentProcess:
        """Start the agent (on the same port as before, if it ran already) and wait for its API."""
        fixed = self.port  # started again, the agent keeps its address
        for _attempt in range(5):
            self.port = fixed or free_ports(1)[0]
            seen = self.log.stat().st_size if self.log.exists() else 0
            with self.log.open("a") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "herder", "agent", "--config", str(self.config),
                     "--bind", f"{self.host}:{self.port}", *args],
                    stdout=log, stderr=log, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    preexec_fn=None if self.nofile is None else self._limit_files)
            if self._wait_up(timeout):
                if not self.token and self.token_file.exists():
                    self.token = self.token_file.read_text().strip()
                return self
            if fixed or "cannot listen" not in self.log.read_text()[seen:]:
                break  # not a port someone took meanwhile
        raise AssertionError(f"the agent did not start:\n{self.log.read_text()}")

    def _limit_files(self) -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))

    def _wait_up(self, timeout: float) -> bool:
        proc = self.proc
        assert proc is not None

        def answered_or_exited() -> bool:
            if proc.poll() is not None:
                return True
            try:
                httpx.get(f"{self.url}/v1/health", headers=self.headers, timeout=2.0, verify=self.verify)
            except httpx.HTTPError:
                return False
            return True

        if poll(answered_or_exited, timeout, interval=0.1) and proc.poll() is None:
            return True
        self.kill()
        return False

    def kill(self) -> None:
        """SIGKILL: the agent dies at once, its tasks run on."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def terminate(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def shutdown(self) -> None:
        """Stop every task and the agent (starting it again if it was killed)."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            self.start()
        try:
            httpx.post(f"{self.url}/v1/agent/drain", headers=self.headers, timeout=10.0, verify=self.verify)
        finally:
            try:
                self.terminate(60.0)
            except subprocess.TimeoutExpired:
                self.kill()

    def cli(self, *args: str, token: str | None = None, addr: str | None = None, env: dict[str, str] | None = None,
            timeout: float = 60.0, cwd: Path | None = None, input: str | None = None
            ) -> subprocess.CompletedProcess[str]:
        """``herder ARGS...`` against this agent, run in ``cwd`` (by default the test's) with ``input``
        on its stdin; ``env`` is set last (an empty value unsets)."""
        environ = {**os.environ, "HERDER_ADDR": addr or self.url,
                   "HERDER_TOKEN": self.token if token is None else token}
        if self.tls is not None:
            environ["HERDER_CACERT"] = str(self.tls.ca)
        return subprocess.run([sys.executable, "-m", "herder", *args], capture_output=True, text=True,
                              env=environ | (env or {}), timeout=timeout, cwd=cwd, input=input)

    def submit(self, text: str, fmt: str = "hcl", **variables: str) -> dict[str, Any]:
        with self.http() as http:
            response = http.post("/v1/jobs", json={"text": text, "format": fmt, "variables": variables})
        assert response.status_code == 200, response.text
        return dict(response.json())

    def replacement(self, job: str, old: str, timeout: float = TIMEOUT) -> str:
        """The ID of the allocation of ``job`` that a new version placed beside (or after) allocation
        ``old``: a submission answers with the job's live allocations, the old ones while the
        deployment replaces them."""
        def placed() -> str | None:
            with self.http() as http:
                listed = http.get(f"/v1/jobs/{job}").json()["allocations"]
            return next((str(a["id"]) for a in listed if a["id"] != old), None)

        return str(wait_for(placed, timeout, f"a new allocation of job {job}"))

    def alloc(self, alloc_id: str) -> dict[str, Any]:
        with self.http() as http:
            response = http.get(f"/v1/allocations/{alloc_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def wait_task(self, alloc_id: str, task: str, state: str = "running", timeout: float = TIMEOUT) -> dict[str, Any]:
        """The task's status once it is in ``state``."""
        def status() -> dict[str, Any]:
            return dict(self.alloc(alloc_id)["tasks"][task])

        def reached() -> dict[str, Any] | None:
            now = status()
            return now if now["state"] == state else None

        def described() -> str:
            now = status()
            return f"task {task} {state}; it is {now['state']}: {now['events']}"

        return wait_for(reached, timeout, described, interval=0.1)

    def wait_event(self, alloc_id: str, task: str, type: str, count: int = 1, timeout: float = TIMEOUT) -> None:
        def events() -> list[dict[str, Any]]:
            return [e for e in self.alloc(alloc_id)["tasks"][task]["events"] if e["type"] == type]

        wait_for(lambda: len(events()) >= count, timeout, lambda: f"{count} {type!r} events of {task}, not "
                 f"{len(events())}", interval=0.1)
