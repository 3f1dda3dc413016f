"""Reaching a task's server from the test, once it is up."""

from __future__ import annotations

import urllib.request

from tests.support.waiting import TIMEOUT, wait_for


def read_url(url: str, timeout: float = TIMEOUT, interval: float = 0.1) -> bytes:
    """GET ``url``, retrying every ``interval`` seconds while the server is not up yet."""
    errors: list[OSError] = []

    def answer() -> tuple[bytes] | None:  # a tuple: an empty body is an answer too
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return (bytes(response.read()),)
        except OSError as error:
            errors[:] = [error]
            return None

    return wait_for(answer, timeout, lambda: f"an answer from {url}; the last error: {errors[-1]}", interval)[0]
