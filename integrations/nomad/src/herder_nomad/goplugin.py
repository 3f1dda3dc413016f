"""The plugin side of HashiCorp's go-plugin protocol, as Nomad 1.1 (go-plugin 1.4) speaks it.

The host starts the plugin with a magic cookie in its environment and reads
one line from its stdout, ``CORE-VERSION|APP-VERSION|NETWORK|ADDRESS|PROTOCOL``;
it then talks gRPC to that address. Besides the application's services, a
go-plugin gRPC server offers the standard health service (service
``plugin``), ``plugin.GRPCController`` (``Shutdown``, so that the host need
not wait for the plugin to exit on its own), ``plugin.GRPCStdio`` and
``plugin.GRPCBroker``. Nomad 1.1 does not ask for AutoMTLS, so the socket is
plain gRPC over a Unix socket in a private directory.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import TextIO

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from herder_nomad.wire import (
    grpc_broker_pb2,
    grpc_broker_pb2_grpc,
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
    grpc_stdio_pb2,
    grpc_stdio_pb2_grpc,
)

CORE_PROTOCOL_VERSION = 1
HOST_CHECK_INTERVAL = 1.0

MAX_WORKERS = 512
"""Server threads: every open stream (fingerprint, events, stats, a waiting WaitTask) holds one."""


@dataclass(frozen=True)
class Handshake:
    """What the host and the plugin must agree on before anything else."""

    cookie_key: str
    cookie_value: str
    app_protocol_version: int


class HandshakeError(Exception):
    """The plugin was not started by its host (or by a host speaking another version)."""


def check_handshake(handshake: Handshake, environ: dict[str, str] | os._Environ[str]) -> None:
    if environ.get(handshake.cookie_key) != handshake.cookie_value:
        raise HandshakeError(
            "This program is a plugin: it is started by its host program (Nomad, from its plugin_dir), "
            "not run directly.")
    offered = environ.get("PLUGIN_PROTOCOL_VERSIONS", "")
    if offered and str(handshake.app_protocol_version) not in offered.split(","):
        raise HandshakeError(f"the host speaks plugin protocol versions {offered}, "
                             f"this plugin speaks {handshake.app_protocol_version}")


class _Controller(grpc_controller_pb2_grpc.GRPCControllerServicer):
    def __init__(self, shutdown: Callable[[], None]) -> None:
        self._shutdown = shutdown

    def Shutdown(self, request: grpc_controller_pb2.Empty, context: grpc.ServicerContext) -> grpc_controller_pb2.Empty:
        # Answer first: the server stops once the reply is on its way.
        threading.Thread(target=self._shutdown, name="go-plugin-shutdown", daemon=True).start()
        return grpc_controller_pb2.Empty()


class _Stdio(grpc_stdio_pb2_grpc.GRPCStdioServicer):
    """The plugin writes its logs to stderr, which the host reads directly: this stream stays
    open and empty until the plugin stops."""

    def __init__(self, stopping: threading.Event) -> None:
        self._stopping = stopping

    def StreamStdio(self, request: object, context: grpc.ServicerContext) -> Iterator[grpc_stdio_pb2.StdioData]:
        while context.is_active() and not self._stopping.wait(1.0):
            pass
        return iter(())


class _Broker(grpc_broker_pb2_grpc.GRPCBrokerServicer):
    """No service of this plugin dials back to the host: the broker stream is accepted and drained."""

    def StartStream(self, request_iterator: Iterator[grpc_broker_pb2.ConnInfo],
                    context: grpc.ServicerContext) -> Iterator[grpc_broker_pb2.ConnInfo]:
        for _ in request_iterator:
            pass
        return iter(())


class PluginServer:
    """A gRPC server on a private Unix socket, with go-plugin's own services."""

    def __init__(self, register: Callable[[grpc.Server], None]) -> None:
        self.stopping = threading.Event()
        self._dir = tempfile.mkdtemp(prefix="herder-nomad-plugin-")
        self.address = os.path.join(self._dir, "plugin.sock")
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="grpc"),
                                  options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)])
        health_servicer = health.HealthServicer()
        health_servicer.set("plugin", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, self.server)
        grpc_controller_pb2_grpc.add_GRPCControllerServicer_to_server(_Controller(self.stop), self.server)
        grpc_stdio_pb2_grpc.add_GRPCStdioServicer_to_server(_Stdio(self.stopping), self.server)
        grpc_broker_pb2_grpc.add_GRPCBrokerServicer_to_server(_Broker(), self.server)
        register(self.server)
        self.server.add_insecure_port(f"unix:{self.address}")

    def start(self, handshake: Handshake, out: TextIO | None = None) -> None:
        """Serve, then tell the host where: the handshake line is the only thing on stdout."""
        self.server.start()
        stream = out if out is not None else sys.stdout
        line = f"{CORE_PROTOCOL_VERSION}|{handshake.app_protocol_version}|unix|{self.address}|grpc\n"
        stream.write(line)
        stream.flush()

    def wait(self) -> None:
        """Serve until the host asks the plugin to stop, or goes away without asking."""
        threading.Thread(target=self._watch_host, name="go-plugin-host", daemon=True).start()
        self.stopping.wait()
        self.server.wait_for_termination()
        shutil.rmtree(self._dir, ignore_errors=True)

    def _watch_host(self) -> None:
        # A host that dies (killed, or failing to start) cannot stop its plugins: a plugin whose
        # parent changed is an orphan and stops by itself. (Not PR_SET_PDEATHSIG: it fires when
        # the forking thread exits, and Go's runtime retires threads while the host lives on.)
        host = os.getppid()
        while not self.stopping.wait(HOST_CHECK_INTERVAL):
            if os.getppid() != host:
                self.stop()

    def stop(self, grace: float = 1.0) -> None:
        self.stopping.set()
        self.server.stop(grace)


def ignore_interrupts() -> None:
    """A Ctrl-C in the host's terminal reaches the plugin too: the host decides when it stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
