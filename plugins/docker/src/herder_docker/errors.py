"""How the driver reports what the Docker daemon answered."""

from __future__ import annotations

import docker.errors
import requests

from herder import DriverError, RecoverableError


def daemon_error(what: str, exc: Exception) -> Exception:
    """A daemon that cannot be reached, times out or answers 5xx may come back:
    recoverable. Any other answer (a 400 for a bad mount, a 404) is final.

    ``APIError`` is a subclass of ``requests.RequestException``, so it is
    told apart first: it is an answer, not a daemon out of reach.
    """
    if isinstance(exc, docker.errors.APIError):
        message = f"{what}: {exc.explanation or exc}"
        return RecoverableError(message) if exc.is_server_error() else DriverError(message)
    if isinstance(exc, requests.RequestException):
        return RecoverableError(f"{what}: Docker daemon unreachable: {exc}")
    return DriverError(f"{what}: {exc}")
