from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor
FIELD_FIELD_NUMBER: _ClassVar[int]
field: _descriptor.FieldDescriptor
ONEOF_FIELD_NUMBER: _ClassVar[int]
oneof: _descriptor.FieldDescriptor

class FieldRules(_message.Message):
    __slots__ = ("required", "min", "max", "clamp", "max_items", "max_len")
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    CLAMP_FIELD_NUMBER: _ClassVar[int]
    MAX_ITEMS_FIELD_NUMBER: _ClassVar[int]
    MAX_LEN_FIELD_NUMBER: _ClassVar[int]
    required: bool
    min: int
    max: int
    clamp: bool
    max_items: int
    max_len: int
    def __init__(self, required: _Optional[bool] = ..., min: _Optional[int] = ..., max: _Optional[int] = ..., clamp: _Optional[bool] = ..., max_items: _Optional[int] = ..., max_len: _Optional[int] = ...) -> None: ...

class OneofRules(_message.Message):
    __slots__ = ("required",)
    REQUIRED_FIELD_NUMBER: _ClassVar[int]
    required: bool
    def __init__(self, required: _Optional[bool] = ...) -> None: ...
