# ruff: noqa
# mypy: ignore-errors
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RecoverableError(_message.Message):
    __slots__ = ("recoverable",)
    RECOVERABLE_FIELD_NUMBER: _ClassVar[int]
    recoverable: bool
    def __init__(self, recoverable: _Optional[bool] = ...) -> None: ...
