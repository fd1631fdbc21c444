from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Target(_message.Message):
    __slots__ = ("kind", "settings_json")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_JSON_FIELD_NUMBER: _ClassVar[int]
    kind: str
    settings_json: str
    def __init__(self, kind: _Optional[str] = ..., settings_json: _Optional[str] = ...) -> None: ...
