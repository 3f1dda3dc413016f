# ruff: noqa
# mypy: ignore-errors
from herder_nomad.wire import hcl_spec_pb2 as _hcl_spec_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PluginType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN: _ClassVar[PluginType]
    DRIVER: _ClassVar[PluginType]
    DEVICE: _ClassVar[PluginType]
UNKNOWN: PluginType
DRIVER: PluginType
DEVICE: PluginType

class PluginInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PluginInfoResponse(_message.Message):
    __slots__ = ("type", "plugin_api_versions", "plugin_version", "name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_API_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    type: PluginType
    plugin_api_versions: _containers.RepeatedScalarFieldContainer[str]
    plugin_version: str
    name: str
    def __init__(self, type: _Optional[_Union[PluginType, str]] = ..., plugin_api_versions: _Optional[_Iterable[str]] = ..., plugin_version: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ConfigSchemaRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ConfigSchemaResponse(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: _hcl_spec_pb2.Spec
    def __init__(self, spec: _Optional[_Union[_hcl_spec_pb2.Spec, _Mapping]] = ...) -> None: ...

class SetConfigRequest(_message.Message):
    __slots__ = ("msgpack_config", "nomad_config", "plugin_api_version")
    MSGPACK_CONFIG_FIELD_NUMBER: _ClassVar[int]
    NOMAD_CONFIG_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_API_VERSION_FIELD_NUMBER: _ClassVar[int]
    msgpack_config: bytes
    nomad_config: NomadConfig
    plugin_api_version: str
    def __init__(self, msgpack_config: _Optional[bytes] = ..., nomad_config: _Optional[_Union[NomadConfig, _Mapping]] = ..., plugin_api_version: _Optional[str] = ...) -> None: ...

class NomadConfig(_message.Message):
    __slots__ = ("driver",)
    DRIVER_FIELD_NUMBER: _ClassVar[int]
    driver: NomadDriverConfig
    def __init__(self, driver: _Optional[_Union[NomadDriverConfig, _Mapping]] = ...) -> None: ...

class NomadDriverConfig(_message.Message):
    __slots__ = ("ClientMaxPort", "ClientMinPort")
    CLIENTMAXPORT_FIELD_NUMBER: _ClassVar[int]
    CLIENTMINPORT_FIELD_NUMBER: _ClassVar[int]
    ClientMaxPort: int
    ClientMinPort: int
    def __init__(self, ClientMaxPort: _Optional[int] = ..., ClientMinPort: _Optional[int] = ...) -> None: ...

class SetConfigResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
