"""A running container, as a herder task handle, and its log streams."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import threading
from typing import IO, Any

import docker
import docker.errors
import requests

from herder import EXEC_OUTPUT_LIMIT, DriverNetwork, ExecResult, ExitResult

LOG_DRAIN_TIMEOUT = 10.0


class LogStream:
    """Copies one stream of a container's log into a task's log sink, from a thread."""

    def __init__(self, client: docker.DockerClient, container_id: str, stream: str, sink: IO[bytes],
                 since: int | None = None) -> None:
        self._thread = threading.Thread(target=self._copy, args=(client, container_id, stream, sink, since),
                                        name=f"docker-logs-{container_id[:12]}-{stream}", daemon=True)
        self._thread.start()

    @staticmethod
    def _copy(client: docker.DockerClient, container_id: str, stream: str, sink: IO[bytes],
              since: int | None) -> None:
        try:
            for chunk in client.api.logs(container_id, stdout=stream == "stdout", stderr=stream == "stderr",
                                         stream=True, follow=True, since=since):
                sink.write(chunk)
        except (docker.errors.APIError, requests.RequestException, ValueError, OSError):
            return  # the container or the sink is gone: nothing more to copy

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


class DockerHandle:
    """A task that is a Docker container."""

    def __init__(self, client: docker.DockerClient, container_id: str, network: DriverNetwork | None,
                 logs: list[LogStream]) -> None:
        self.client = client
        self.id = container_id
        self.network = network
        self._logs = logs
        self._result: ExitResult | None = None
        self._lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> ExitResult | None:
        if self._result is not None:
            return self._result
        try:
            self.client.api.wait(self.id, timeout=None if timeout is None else max(1, math.ceil(timeout)))
        except requests.exceptions.ReadTimeout:
            return None
        except requests.exceptions.ConnectionError as exc:
            if "timed out" in str(exc).lower():
                return None
            raise
        except docker.errors.NotFound:
            return self._set_result(ExitResult(exit_code=255, error="container disappeared"))
        for stream in self._logs:
            stream.join(LOG_DRAIN_TIMEOUT)
        state = self.client.api.inspect_container(self.id)["State"]
        return self._set_result(ExitResult(exit_code=int(state.get("ExitCode", 0)),
                                           oom_killed=bool(state.get("OOMKilled")),
                                           error=state.get("Error") or None))

    def _set_result(self, result: ExitResult) -> ExitResult:
        with self._lock:
            if self._result is None:
                self._result = result
            return self._result

    def signal(self, sig: int) -> None:
        try:
            self.client.api.kill(self.id, signal=int(sig))
        except docker.errors.APIError as exc:
            if exc.status_code not in (404, 409):  # gone, or not running
                raise

    def kill(self, timeout: float, sig: int | None = None) -> None:
        self.signal(sig if sig is not None else signal.SIGTERM)
        if self.wait(timeout) is None:
            self.signal(signal.SIGKILL)
            self.wait()

    def stats(self) -> dict[str, Any] | None:
        try:
            stats = self.client.api.stats(self.id, stream=False)
        except (docker.errors.APIError, requests.RequestException):
            return None
        memory = stats.get("memory_stats") or {}
        return {"memory_usage_bytes": memory.get("usage"), "memory_limit_bytes": memory.get("limit")}

    def state(self) -> dict[str, Any]:
        return {"container_id": self.id}

    def exec(self, command: list[str], timeout: float) -> ExecResult:
        """Run ``command`` in the container through the Docker exec API.

        :raises TimeoutError: after ``timeout`` seconds (the command is killed).
        """
        exec_id = self.client.api.exec_create(self.id, command, stdout=True, stderr=True)["Id"]
        output = bytearray()

        def read() -> None:
            for chunk in self.client.api.exec_start(exec_id, stream=True):
                if len(output) < EXEC_OUTPUT_LIMIT:
                    output.extend(chunk[: EXEC_OUTPUT_LIMIT - len(output)])

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            pid = self.client.api.exec_inspect(exec_id).get("Pid")
            if pid:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            raise TimeoutError(f"command timed out after {timeout:g}s")
        exit_code = self.client.api.exec_inspect(exec_id).get("ExitCode")
        return ExecResult(exit_code=int(exit_code if exit_code is not None else 255), output=bytes(output))
