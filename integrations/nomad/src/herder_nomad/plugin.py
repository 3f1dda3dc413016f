"""``nomad-driver-herder``: the executable Nomad finds in its ``plugin_dir``."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from herder_nomad.identity import PluginIdentity
from herder_nomad.wire import driver_pb2, driver_pb2_grpc

if TYPE_CHECKING:
    from herder_nomad.broken import BrokenDriver
    from herder_nomad.driver import HerderDriver

    Service = HerderDriver | BrokenDriver

MAGIC_COOKIE_KEY = "NOMAD_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "e4327c2e01eabfd75a8a67adb114fb34a757d57eee7728d857a8cec6e91a7255"
PROTOCOL_VERSION = 2


def main() -> int:
    # go-plugin's host reads the plugin's stderr as its log: one line per record.
    logging.basicConfig(level=os.environ.get("HERDER_NOMAD_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    import grpc

    from herder_nomad import goplugin

    handshake = goplugin.Handshake(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, PROTOCOL_VERSION)
    try:
        goplugin.check_handshake(handshake, os.environ)
    except goplugin.HandshakeError as err:
        print(err, file=sys.stderr)
        return 1
    if os.environ.get("PLUGIN_CLIENT_CERT"):
        # go-plugin's AutoMTLS: Nomad (1.1 to this day) never asks for it; a host that does would
        # expect a certificate in the handshake, which this plugin does not give.
        logging.getLogger(__name__).warning("the host asks for AutoMTLS, which this plugin does not speak")
    goplugin.ignore_interrupts()
    service = DeferredDriver()

    def register(server: grpc.Server) -> None:
        from herder_nomad.wire import base_pb2_grpc, driver_pb2_grpc
        base_pb2_grpc.add_BasePluginServicer_to_server(service, server)
        driver_pb2_grpc.add_DriverServicer_to_server(service, server)

    server = goplugin.PluginServer(register)
    # The handshake line is the only thing that may reach stdout: whatever a plugin prints goes to stderr.
    stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    server.start(handshake, stdout)
    stdout.close()
    try:
        server.wait()
    finally:
        service.close()
    return 0


class DeferredDriver(PluginIdentity, driver_pb2_grpc.DriverServicer):
    """The driver service, importing herder only when a call needs it.

    A Nomad client starts the plugin three times: twice its plugin loader only
    asks who the plugin is and which configuration it takes (``PluginInfo``,
    ``ConfigSchema``), then it starts it for good. Importing herder with its
    plugins takes over a second, several under load, and the client recovers
    its tasks only after the last start: so the first two answer at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._service: Service | None = None

    def service(self) -> Service:
        with self._lock:
            if self._service is None:
                self._service = _load_service()
            return self._service

    def close(self) -> None:
        with self._lock:
            if self._service is not None:
                self._service.close()


def _forward(name: str) -> Any:
    def call(self: DeferredDriver, request: Any, context: Any) -> Any:
        return getattr(self.service(), name)(request, context)
    call.__name__ = name
    return call


for _method in ["SetConfig", *driver_pb2.DESCRIPTOR.services_by_name["Driver"].methods_by_name]:
    setattr(DeferredDriver, _method, _forward(_method))


def _load_service() -> Service:
    """herder's driver service; a herder that cannot be imported must not break the handshake."""
    try:
        from herder_nomad.driver import HerderDriver
        return HerderDriver()
    except Exception as exc:
        logging.getLogger(__name__).error("herder cannot be loaded: %s", exc, exc_info=True)
        from herder_nomad.broken import BrokenDriver
        return BrokenDriver(f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
