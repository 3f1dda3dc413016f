"""Reaching a task's server from the test, once it is up."""

from __future__ import annotations

import time
import urllib.request


def read_url(url: str, timeout: float = 20.0, interval: float = 0.1) -> bytes:
    """GET ``url``, retrying every ``interval`` seconds while the server is not up yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return bytes(response.read())
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(interval)
