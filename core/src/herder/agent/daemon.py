"""Running the agent: the socket, the ASGI server, signals and structured logs."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from types import FrameType
from typing import Literal

import uvicorn

from herder import app
from herder.agent import connections, credential, exec_ws, nomad
from herder.agent.api import ASGIApp, asgi
from herder.agent.events import EventLog, log_health
from herder.client.config import Config, TlsConfig, parse_bind
from herder.client.taskdir import make_data_dir
from herder.errors import ConfigError

log = logging.getLogger("herder.agent")

SHUTDOWN_GRACE = 3
"""Seconds open requests (a followed log, the event stream) get to finish when the agent stops."""
ABANDON_AFTER = 2
"""Seconds, after the grace, that requests cancelled then and the threads they ran in get to end
before the agent exits without them."""

KEEP_ALIVE = 100
"""Seconds an idle kept-alive connection stays open. Longer than the clients keep one idle
(httpx 5 s, Go's net/http 90 s): the client, not the server, closes it. Were the server
first (uvicorn's default is 5 s, httpx's exactly as long), a client reusing the connection
just as the server closes it gets a reset instead of an answer."""


class LogfmtFormatter(logging.Formatter):
    """One ``key=value`` line per record: ``time=... level=info logger=herder.agent msg="..."``."""

    def format(self, record: logging.LogRecord) -> str:
        time_ = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        line = f"time={time_} level={record.levelname.lower()} logger={record.name} msg={_quote(record.getMessage())}"
        if record.exc_info:
            line += f" error={_quote(self.formatException(record.exc_info))}"
        return line


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def setup_logging(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the registry's checks of the agent itself


def is_loopback(host: str) -> bool:
    """Whether ``host`` is loopback (127.0.0.0/8, ::1) only: a name counts by every
    address it resolves to, and one that does not resolve is not loopback."""
    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    return all(ipaddress.ip_address(str(info[4][0]).partition("%")[0]).is_loopback for info in found)


def check_exposure(config: Config, bind: str | None = None) -> tuple[str, int]:
    """Where to listen (``bind``, by default the configuration's, parsed), refusing a
    bind beyond loopback without a configured token: whoever reaches the agent could run
    jobs on this host as root. (With a token, every route needs it. The one the agent makes
    itself, :mod:`herder.agent.credential`, is for this host's root; ``[agent]
    insecure_no_token`` is for loopback alone.)

    :raises ConfigError: the bind is malformed, or open without a token.
    """
    bind = config.bind if bind is None else bind
    try:
        host, port = parse_bind(bind)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if is_loopback(host):
        return host, port
    if not config.token:
        raise ConfigError(f"refusing to listen on {bind} without a token: whoever can reach it could run "
                          "jobs on this host; set token in the configuration, or bind to 127.0.0.1"
                          + (" ([agent] insecure_no_token is for loopback alone)"
                             if config.agent.insecure_no_token else ""))
    if config.tls.cert_file is None:
        log.warning("listening on %s without TLS: the token crosses the network in the clear "
                    "(set [tls] cert_file and key_file)", bind)
    return host, port


def tls_context(tls: TlsConfig) -> ssl.SSLContext | None:
    """The server's TLS context (Python's secure defaults: TLS 1.2 or later), or None for plain HTTP.

    :raises ConfigError: naming the files that cannot be loaded.
    """
    if tls.cert_file is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    except OSError as exc:  # ssl.SSLError is one
        raise ConfigError(f"[tls] cert_file {tls.cert_file}, key_file {tls.key_file}: cannot load: "
                          f"{exc.strerror or exc}") from None
    return context


def listen(host: str, port: int, backlog: int = connections.BACKLOG) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: a response written in two parts (head, then body) must not
    # wait for the client's delayed ACK (40 ms on Linux) on a kept-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(backlog)
    sock.set_inheritable(False)
    return sock


class _CancelledAtStop(logging.Filter):
    """Drops uvicorn's traceback for each request it cancels once the stop's grace is over: it has
    said how many it cancels, and a stop amid many requests (followed logs) would log one each."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


class _Server(uvicorn.Server):
    """uvicorn without its signal handling: the agent's handlers stop it, and
    the agent (not a re-raised signal) decides how the process ends."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's graceful shutdown, after which the connections still open are closed: uvicorn
        cancels their requests but leaves them open."""
        await super().shutdown(sockets)
        for connection in list(self.server_state.connections):
            connection.transport.abort()


def serve(servers: list[tuple[_Server, socket.socket]], tally: connections.Tally) -> None:
    """Run every server on its socket, in one event loop, until all have stopped; what the
    connections' bounds dropped is counted in ``tally``.

    The loop is closed without waiting on what cannot end: a request cancelled after the grace but
    still waiting on a worker thread (a job being parsed, a command being run) is left behind, and
    :func:`run` decides about its thread.
    """

    async def every() -> None:
        asyncio.get_running_loop().set_exception_handler(tally.exception_handler)
        try:
            await asyncio.gather(*(each.serve(sockets=[each_sock]) for each, each_sock in servers))
        finally:
            tally.report()

    loop = (servers[0][0].config.get_loop_factory() or asyncio.new_event_loop)()
    try:
        loop.run_until_complete(every())
        if left := asyncio.all_tasks(loop):
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.wait(left, timeout=ABANDON_AFTER))
    finally:
        loop.close()  # the default executor is shut down, not waited for


def _exit_past_threads(code: int) -> None:
    """Exit with ``code`` at once if threads a request ran in are still busy a while after the agent
    has stopped and closed its state: the interpreter would wait for them at exit (a pool's workers
    are joined then), for as long as they take."""
    deadline = time.monotonic() + ABANDON_AFTER
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    busy = [t.name for t in threading.enumerate() if t is not threading.current_thread() and not t.daemon and
            t.is_alive()]
    if busy:
        log.warning("exiting without waiting for %d busy thread(s): %s", len(busy), ", ".join(sorted(set(busy))))
        logging.shutdown()
        os._exit(code)


def run(config: Config, *, drain: bool = False) -> int:
    """Serve until SIGINT or SIGTERM; tasks are left running for the next agent
    unless ``drain``. Returns the exit code.

    Whether the agent may listen where it is told, and with what certificate,
    is settled before anything is bound or started; then the token every request
    needs (:mod:`herder.agent.credential`).
    """
    nomad_bind = config.nomad_api.bind
    try:
        host, port = check_exposure(config)
        nomad_address = check_exposure(config, nomad_bind) if nomad_bind else None
        tls = tls_context(config.tls)
        make_data_dir(config.data_dir)  # refused if another user could change it, before anything of it is used
        config = credential.with_token(config)
    except ConfigError as exc:
        log.error("%s", exc)
        return 1
    limit, backlog = connections.budget(connections.raise_descriptor_limit(), 2 if nomad_address else 1)
    try:
        sock = listen(host, port, backlog)
    except OSError as exc:
        log.error("cannot listen on %s: %s", config.bind, exc)
        return 1
    try:
        nomad_sock = listen(*nomad_address, backlog) if nomad_address else None
    except OSError as exc:
        log.error("cannot listen on %s ([nomad_api] bind): %s", nomad_bind, exc)
        sock.close()
        return 1
    hooks = app.load_hooks(config)
    for warning in app.failed_plugins(hooks):
        log.warning("%s", warning)
    events = EventLog()
    agent = app.Agent(config, hooks, on_event=events.record, on_health=log_health, on_collected=events.forget)
    agent.client.on_alloc_done = events.ended

    tally = connections.Tally()
    logging.getLogger("uvicorn.error").addFilter(_CancelledAtStop())
    logging.getLogger("uvicorn.error").addFilter(tally)

    def server(application: ASGIApp, lifespan: Literal["on", "off"]) -> _Server:
        bounded = connections.protocol(connections.Limits(limit, tally))
        return _Server(uvicorn.Config(application, log_config=None, access_log=False, lifespan=lifespan,
                                      timeout_graceful_shutdown=SHUTDOWN_GRACE, timeout_keep_alive=KEEP_ALIVE,
                                      http=bounded, backlog=backlog, ws_max_size=exec_ws.MAX_FRAME,
                                      ssl_context_factory=None if tls is None else lambda _config, _default: tls))

    servers = [(server(asgi(agent, events), "on"), sock)]
    if nomad_sock is not None:
        nomad_host, nomad_port = nomad_sock.getsockname()[:2]
        main_host, main_port = sock.getsockname()[:2]
        servers.append((server(nomad.asgi(agent, events, f"{nomad_host}:{nomad_port}", f"{main_host}:{main_port}"),
                               "off"), nomad_sock))

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s: %s", signal.Signals(signum).name,
                 "stopping every task, then exiting" if drain else "exiting; tasks keep running")
        for each, _ in servers:
            each.should_exit = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        restored = agent.start(address=sock.getsockname()[:2])
        log.info("agent %s listening on %s (at most %d connections), data dir %s, %d allocation(s) reattached",
                 agent.version, config.bind, limit, config.data_dir, len(restored))
        if nomad_sock is not None:
            log.info("Nomad-compatible API listening on %s", nomad_bind)
        serve(servers, tally)
        if drain or agent.draining:
            started = time.monotonic()
            agent.drain()
            log.info("every task stopped in %.1fs", time.monotonic() - started)
    finally:
        agent.close()
        for _, each_sock in servers:
            each_sock.close()
    log.info("agent stopped")
    _exit_past_threads(0)
    return 0
