"""The command line's HTTP client of the agent, :class:`AgentClient`: what ``herder job`` and ``herder alloc``
(:mod:`herder.cli.remote`) and the session of ``herder alloc exec`` (:mod:`herder.cli.interactive`) talk through.

Where the agent is and what it is trusted with come from the environment (``HERDER_ADDR``,
``HERDER_TOKEN``, ``HERDER_CACERT``, ``HERDER_SKIP_VERIFY``: :mod:`herder.cli.remote`). It is on
the standard library's :mod:`http.client`: the commands start in tens of milliseconds, so they
import neither the agent nor an HTTP library's own imports.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import json
import os
import ssl
from collections.abc import Iterator
from typing import Any, NoReturn
from urllib.parse import quote, urlencode, urlsplit

import click

from herder.cli.common import EXIT_INVALID, fail, invalid
from herder.credential import cli_token
from herder.errors import ConfigError

DEFAULT_ADDR = "http://127.0.0.1:4646"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT: float | None = 30.0
"""Seconds to connect, and to wait for each read of an answer (None: a followed stream waits for ever)."""
CHUNK = 64 << 10
CONFIG = "herder.config"
"""Where ``--config`` is kept in the command's context (:func:`herder.cli.remote.config_option`)."""


class AgentClient:
    """An HTTP client of the agent at ``HERDER_ADDR`` that turns every failure into a message.

    Each request has a connection of its own: the agent is near, and no
    connection is left half-read by a stream that stopped early.
    """

    def __init__(self) -> None:
        addr = os.environ.get("HERDER_ADDR") or DEFAULT_ADDR
        self.addr = addr if "://" in addr else "http://" + addr
        try:
            url = urlsplit(self.addr)
            port = url.port
        except ValueError:  # a port that is not a number, or out of range
            port = -1
        if url.scheme not in ("http", "https") or not url.hostname or port == -1:
            fail(f"HERDER_ADDR {addr}: expected a URL such as {DEFAULT_ADDR}")
        self.host = url.hostname
        self.port = port or (443 if url.scheme == "https" else 80)
        self.prefix = url.path.rstrip("/")
        self.https = url.scheme == "https"
        # A CA bundle that is named is loaded whatever the address: a wrong one is said at once.
        self.tls = tls_verify() if self.https or os.environ.get("HERDER_CACERT") else None
        token = os.environ.get("HERDER_TOKEN") or local_token(self.host)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def _send(self, method: str, path: str, params: dict[str, Any] | None, body: Any,
              read_timeout: float | None) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        target = quote(self.prefix + path, safe="/:@") + (f"?{urlencode(params)}" if params else "")
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        connection = (http.client.HTTPSConnection(self.host, self.port, timeout=CONNECT_TIMEOUT, context=self.tls)
                      if self.https else
                      http.client.HTTPConnection(self.host, self.port, timeout=CONNECT_TIMEOUT))
        try:
            connection.connect()
            assert connection.sock is not None
            connection.sock.settimeout(read_timeout)
            connection.request(method, target, body=data, headers=headers)
            response = connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            self.unreachable(exc)
        if not 200 <= response.status < 300:
            with contextlib.closing(connection):
                self._refused(response)
        return connection, response

    def _refused(self, response: http.client.HTTPResponse) -> NoReturn:
        try:
            text = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.unreachable(exc)
        self.refused(response.status, text)

    def refused(self, status: int, text: bytes) -> NoReturn:
        """Say why the agent answered ``status`` (with the API's JSON error ``text``), and exit."""
        try:
            body = json.loads(text)
            message, errors = str(body.get("error", "")), [str(e) for e in body.get("errors", [])]
        except (ValueError, AttributeError):
            message, errors = text[:200].decode("utf-8", "replace"), []
        if status == 401:
            fail(f"the agent at {self.addr} refused the request: {message}")
        if errors and message == "invalid job":
            invalid("the job is invalid", errors)
        fail((message or f"HTTP {status}") + "".join(f"\n  * {e}" for e in errors))

    def request(self, method: str, path: str, *, json_body: Any = None,
                read_timeout: float | None = READ_TIMEOUT) -> Any:
        """The JSON answer to ``method path`` (with ``json_body``)."""
        connection, response = self._send(method, path, None, json_body, read_timeout)
        with contextlib.closing(connection):
            try:
                return json.loads(response.read())
            except (OSError, http.client.HTTPException) as exc:
                self.unreachable(exc)

    def stream(self, path: str, params: dict[str, Any], read_timeout: float | None = READ_TIMEOUT) -> Iterator[bytes]:
        """The body of ``GET path?params`` as it comes."""
        connection, response = self._send("GET", path, params, None, read_timeout)
        with contextlib.closing(connection):
            try:
                while chunk := response.read1(CHUNK):
                    yield chunk
            except (OSError, http.client.HTTPException) as exc:
                self.unreachable(exc)

    def websocket_url(self, path: str, params: dict[str, str]) -> str:
        """The ``ws://`` (``wss://``) URL of ``path?params`` on the agent."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return (f"{'wss' if self.https else 'ws'}://{host}:{self.port}"
                f"{quote(self.prefix + path, safe='/:@')}?{urlencode(params)}")

    def unreachable(self, exc: BaseException) -> NoReturn:
        if isinstance(exc, TimeoutError):
            fail(f"the agent at {self.addr} did not answer in time: {exc}")
        if isinstance(exc, ssl.SSLCertVerificationError):
            fail(f"the certificate of the agent at {self.addr} is not trusted ({exc.verify_message}); "
                 "set HERDER_CACERT to the CA bundle that signed it")
        if isinstance(exc, ssl.SSLError):
            fail(f"no TLS with the agent at {self.addr} ({exc.reason or exc}); does it serve HTTPS?")
        https = " (https:// if it serves TLS)" if self.addr.startswith("http://") else ""
        fail(f"cannot reach the herder agent at {self.addr} ({exc or type(exc).__name__}); "
             f"is `herder agent` running, and is HERDER_ADDR right{https}?")


def local_token(host: str) -> str:
    """The token of the agent of this host (``""`` if not readable), for an agent at ``host`` on loopback:
    a token found on this host is never sent elsewhere."""
    if host != "localhost" and not _is_loopback_address(host):
        return ""

    context = click.get_current_context(silent=True)
    try:
        return cli_token(context.meta.get(CONFIG) if context is not None else None)
    except ConfigError as exc:
        fail(str(exc), EXIT_INVALID)


def _is_loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_verify() -> ssl.SSLContext:
    """How an https agent's certificate is verified: against HERDER_CACERT, else the system's store."""
    if os.environ.get("HERDER_SKIP_VERIFY", "").lower() in ("1", "true", "yes"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    cacert = os.environ.get("HERDER_CACERT") or None
    try:
        return ssl.create_default_context(cafile=cacert)
    except OSError as exc:  # ssl.SSLError is one
        fail(f"HERDER_CACERT {cacert}: cannot load a CA bundle: "
             f"{exc.strerror or exc}")
