# ruff: noqa
# mypy: ignore-errors
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Attribute(_message.Message):
    __slots__ = ("float_val", "int_val", "string_val", "bool_val", "unit")
    FLOAT_VAL_FIELD_NUMBER: _ClassVar[int]
    INT_VAL_FIELD_NUMBER: _ClassVar[int]
    STRING_VAL_FIELD_NUMBER: _ClassVar[int]
    BOOL_VAL_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    float_val: float
    int_val: int
    string_val: str
    bool_val: bool
    unit: str
    def __init__(self, float_val: _Optional[float] = ..., int_val: _Optional[int] = ..., string_val: _Optional[str] = ..., bool_val: _Optional[bool] = ..., unit: _Optional[str] = ...) -> None: ...
