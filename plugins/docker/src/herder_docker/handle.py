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

from herder import EXEC_OUTPUT_LIMIT, DriverNetwork, ExecResult, ExitResult, TaskStats

LOG_DRAIN_TIMEOUT = 10.0
LOG_DRIVER = {"type": "none"}
"""The daemon's own log driver for herder's containers: none, herder's files are the log.

A container's output reaches herder through its attach stream
(:class:`ContainerOutput`), not the daemon's logs API. A log driver would get
a copy of every byte too, and it is no help: the daemon's copier into it paces
the container (it is fed in step with the attach stream), and when the
container exits the daemon waits at most 10 s for it before closing the log,
so a backlog is dropped for good; ``json-file`` on a busy machine fell that far
behind after 2 MB, and the logs API then lacked the rest.
"""


def running_container(client: docker.DockerClient, name: str) -> Any:
    """The running container of this name (from an earlier run of herder); one that is
    not running is removed, and None returned, as when there is none."""
    try:
        container = client.containers.get(name)
    except docker.errors.NotFound:
        return None
    if container.status == "running":
        return container
    container.remove(force=True)
    return None


class ContainerOutput:
    """Copies a container's stdout and stderr into the task's log sinks, from a thread.

    It reads the container's attach stream, the daemon's copy of what the
    container writes (as ``docker start --attach`` does): attached before the
    start, it has every byte from the first, and it ends after the last,
    once the container has exited. A slow disk holds the container back
    only once the sink's pipe and the daemon's buffer are full. Attached to a
    running container (herder restarted), it has what the container writes
    from then on: the log files hold what herder copied before, and nothing
    is copied twice.
    """

    def __init__(self, client: docker.DockerClient, container_id: str, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        """Attach to the container (:raises docker.errors.APIError: as the daemon answers)
        and start copying."""
        self._frames = client.api.attach(container_id, stdout=True, stderr=True, stream=True, logs=False, demux=True)
        self._thread = threading.Thread(target=self._copy, args=(stdout, stderr),
                                        name=f"docker-logs-{container_id[:12]}", daemon=True)
        self._thread.start()

    def _copy(self, stdout: IO[bytes], stderr: IO[bytes]) -> None:
        try:
            for out, err in self._frames:
                if out:
                    stdout.write(out)
                if err:
                    stderr.write(err)
        except (docker.errors.APIError, requests.RequestException, ValueError, OSError):
            pass  # the container or the sink is gone: nothing more to copy
        finally:
            self._disconnect()

    def join(self, timeout: float) -> None:
        """Wait until the stream has ended (the container exited) and all of it is in the sinks."""
        self._thread.join(timeout)

    def close(self) -> None:
        """Stop copying: for a container that is not going to run."""
        self._disconnect()
        self._thread.join(LOG_DRAIN_TIMEOUT)

    def _disconnect(self) -> None:
        with contextlib.suppress(OSError):  # closed already, by the other of close() and the copier
            self._frames.close()


class DockerHandle:
    """A task that is a Docker container."""

    def __init__(self, client: docker.DockerClient, container_id: str, network: DriverNetwork | None,
                 output: ContainerOutput) -> None:
        self.client = client
        self.id = container_id
        self.network = network
        self._output = output
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
        self._output.join(LOG_DRAIN_TIMEOUT)
        try:
            state = self.client.api.inspect_container(self.id)["State"]
        except docker.errors.NotFound:
            # Removed meanwhile: by the task's cleanup, once a wait in another thread (the kill's, or
            # the runner's) saw the exit and recorded it, which _set_result then gives.
            return self._set_result(ExitResult(exit_code=255, error="container disappeared"))
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

    def stats(self) -> TaskStats | None:
        """The container's figures as Docker's stats API has them, in one read (``one-shot``: no
        second sample for Docker's own percent, which the client computes anyway)."""
        try:
            stats = self.client.api.stats(self.id, stream=False, one_shot=True)
        except (docker.errors.APIError, requests.RequestException):
            return None
        memory = stats.get("memory_stats") or {}
        if memory.get("usage") is None:
            return None  # not running
        detail = memory.get("stats") or {}
        cpu = stats.get("cpu_stats") or {}
        throttling = cpu.get("throttling_data") or {}
        return TaskStats(
            memory_rss_bytes=detail.get("total_rss", detail.get("anon")),  # cgroup v1, v2
            memory_usage_bytes=memory["usage"], memory_limit_bytes=memory.get("limit"),
            cpu_total_ns=(cpu.get("cpu_usage") or {}).get("total_usage"),
            cpu_throttled_periods=throttling.get("throttled_periods"),
            cpu_throttled_ns=throttling.get("throttled_time"),
            pids=(stats.get("pids_stats") or {}).get("current"),
        )

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
