"""The driver service of a plugin whose herder side failed to import.

A plugin that fails its handshake stops the whole Nomad agent from starting;
so the plugin always completes it, and a herder it cannot load shows as an
undetected driver, with the reason, in ``nomad node status -verbose``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import grpc

from herder_nomad import hclspec
from herder_nomad.identity import PluginIdentity
from herder_nomad.wire import base_pb2, driver_pb2, driver_pb2_grpc


class BrokenDriver(PluginIdentity, driver_pb2_grpc.DriverServicer):
    """Takes the plugin block the working plugin takes (so that the agent still starts) and says why it fails."""

    def __init__(self, error: str) -> None:
        self.error = error

    def SetConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        return base_pb2.SetConfigResponse()

    def TaskConfigSchema(self, request: Any, context: grpc.ServicerContext) -> Any:
        return driver_pb2.TaskConfigSchemaResponse(spec=hclspec.obj({
            name: hclspec.attr(name, "any") for name in ("driver", "config")}))

    def Capabilities(self, request: Any, context: grpc.ServicerContext) -> Any:
        return driver_pb2.CapabilitiesResponse(capabilities=driver_pb2.DriverCapabilities())

    def Fingerprint(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        yield driver_pb2.FingerprintResponse(health=driver_pb2.FingerprintResponse.UNDETECTED,
                                             health_description=f"herder cannot be loaded: {self.error}")
        while context.is_active():  # the stream stays open until Nomad closes it
            time.sleep(5)

    def StartTask(self, request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"herder cannot be loaded: {self.error}")

    def close(self) -> None:
        pass

