"""Who the plugin is and which configuration it takes: all that Nomad's plugin loader asks.

This module imports nothing of herder, so that the plugin can answer the
loader at once (see :class:`herder_nomad.plugin.DeferredDriver`).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import grpc

from herder_nomad import hclspec
from herder_nomad.wire import base_pb2, base_pb2_grpc

PLUGIN_NAME = "herder"
PLUGIN_API_VERSION = "v0.1.0"


def plugin_version() -> str:
    try:
        return version("herder-nomad")
    except PackageNotFoundError:
        return "0.0.0"


class PluginIdentity(base_pb2_grpc.BasePluginServicer):
    """``PluginInfo`` and ``ConfigSchema`` of the base plugin service, shared by every driver service."""

    def PluginInfo(self, request: base_pb2.PluginInfoRequest, context: grpc.ServicerContext) -> Any:
        return base_pb2.PluginInfoResponse(type=base_pb2.DRIVER, plugin_api_versions=[PLUGIN_API_VERSION],
                                           plugin_version=plugin_version(), name=PLUGIN_NAME)

    def ConfigSchema(self, request: base_pb2.ConfigSchemaRequest, context: grpc.ServicerContext) -> Any:
        return base_pb2.ConfigSchemaResponse(spec=hclspec.obj({
            "data_dir": hclspec.attr("data_dir", "string"),
            "disabled_plugins": hclspec.attr("disabled_plugins", "list(string)"),
            "plugin": hclspec.attr("plugin", "any"),
        }))
