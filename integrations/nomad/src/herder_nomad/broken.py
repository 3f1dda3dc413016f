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

from herder_nomad.wire import base_pb2, base_pb2_grpc, driver_pb2, driver_pb2_grpc, hcl_spec_pb2


class BrokenDriver(base_pb2_grpc.BasePluginServicer, driver_pb2_grpc.DriverServicer):
    def __init__(self, error: str) -> None:
        self.error = error

    def PluginInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return base_pb2.PluginInfoResponse(type=base_pb2.DRIVER, plugin_api_versions=["v0.1.0"],
                                           plugin_version="0.0.0", name="herder")

    def ConfigSchema(self, request: Any, context: grpc.ServicerContext) -> Any:
        # Accept the plugin block the working plugin accepts, so that the agent still starts.
        return base_pb2.ConfigSchemaResponse(spec=_object("data_dir", "disabled_plugins", "plugin"))

    def SetConfig(self, request: Any, context: grpc.ServicerContext) -> Any:
        return base_pb2.SetConfigResponse()

    def TaskConfigSchema(self, request: Any, context: grpc.ServicerContext) -> Any:
        return driver_pb2.TaskConfigSchemaResponse(spec=_object("driver", "config"))

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


def _object(*names: str) -> hcl_spec_pb2.Spec:
    return hcl_spec_pb2.Spec(object=hcl_spec_pb2.Object(attributes={
        name: hcl_spec_pb2.Spec(Attr=hcl_spec_pb2.Attr(name=name, type="any")) for name in names}))
