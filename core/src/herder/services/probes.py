"""Running http and tcp checks, as Consul runs them, for the embedded registry.

Consul's rules: an http check passes on a 2xx answer, warns on 429 Too Many
Requests and is critical otherwise (or on no answer within the timeout); a
tcp check passes when a connection is accepted within the timeout.
"""

from __future__ import annotations

import heapq
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx

from herder.services.model import CRITICAL, OUTPUT_LIMIT, PASSING, WARNING, CheckRegistration, CheckStatus


class Prober:
    """Runs checks, with one HTTP client per TLS mode for all of them: a check's run
    does not build a client and its TLS context anew. Connections are not kept
    alive, so that every run connects afresh, as Consul's checks do."""

    def __init__(self) -> None:
        limits = httpx.Limits(max_keepalive_connections=0)
        self._http = {verify: httpx.Client(verify=verify, limits=limits) for verify in (True, False)}

    def probe(self, check: CheckRegistration) -> CheckStatus:
        """Run ``check`` once."""
        if check.kind == "http":
            return self._probe_http(check)
        if check.kind == "tcp":
            return _tcp(check)
        raise ValueError(f"the embedded registry does not run {check.kind} checks")

    def _probe_http(self, check: CheckRegistration) -> CheckStatus:
        headers = [(name, value) for name, values in check.header.items() for value in values]
        client = self._http[not check.tls_skip_verify]
        try:
            response = client.request(check.method, check.target, headers=headers, timeout=check.timeout)
        except httpx.HTTPError as exc:
            return CheckStatus(CRITICAL, f"{check.method} {check.target}: {exc or type(exc).__name__}")
        code = response.status_code
        status = PASSING if 200 <= code < 300 else WARNING if code == 429 else CRITICAL
        body = response.content[:OUTPUT_LIMIT].decode(errors="replace")
        return CheckStatus(status, f"HTTP {check.method} {check.target}: {code} {response.reason_phrase} "
                                   f"Output: {body}")

    def close(self) -> None:
        for client in self._http.values():
            client.close()


def _tcp(check: CheckRegistration) -> CheckStatus:
    host, _, port = check.target.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=check.timeout):
            pass
    except OSError as exc:
        return CheckStatus(CRITICAL, f"TCP connect {check.target}: {exc.strerror or exc}")
    return CheckStatus(PASSING, f"TCP connect {check.target}: Success")


class Scheduler:
    """Calls ``run(key)`` for every scheduled key, every ``interval`` seconds,
    on a small pool of threads: a thousand checks cost a handful of threads."""

    def __init__(self, run: Callable[[str], None], workers: int = 8, name: str = "checks") -> None:
        self._run = run
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
        self._heap: list[tuple[float, int, str]] = []
        self._intervals: dict[str, float] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._sequence = 0
        self._thread = threading.Thread(target=self._loop, name=f"{name}-scheduler", daemon=True)
        self._thread.start()

    def add(self, key: str, interval: float, first: float = 0.0) -> None:
        """Run ``key`` every ``interval`` seconds, the first time after ``first``."""
        with self._cond:
            self._intervals[key] = interval
            self._push(time.monotonic() + first, key)

    def remove(self, key: str) -> None:
        with self._cond:
            self._intervals.pop(key, None)

    def _push(self, due: float, key: str) -> None:
        self._sequence += 1
        heapq.heappush(self._heap, (due, self._sequence, key))
        self._cond.notify()

    def _loop(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._heap:
                    self._cond.wait()
                    continue
                due, _, key = self._heap[0]
                delay = due - time.monotonic()
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                heapq.heappop(self._heap)
                interval = self._intervals.get(key)
                if interval is None:
                    continue  # removed since it was scheduled
                self._push(max(due + interval, time.monotonic()), key)
                self._pool.submit(self._run, key)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
