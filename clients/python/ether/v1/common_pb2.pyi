import datetime

from ether.v1 import rules_pb2 as _rules_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Language(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LANGUAGE_UNSPECIFIED: _ClassVar[Language]
    LANGUAGE_PYTHON: _ClassVar[Language]
    LANGUAGE_GO: _ClassVar[Language]
    LANGUAGE_TYPESCRIPT: _ClassVar[Language]
LANGUAGE_UNSPECIFIED: Language
LANGUAGE_PYTHON: Language
LANGUAGE_GO: Language
LANGUAGE_TYPESCRIPT: Language

class Budget(_message.Message):
    __slots__ = ("max_cost", "max_time", "max_iterations", "max_tasks")
    MAX_COST_FIELD_NUMBER: _ClassVar[int]
    MAX_TIME_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    max_cost: float
    max_time: _duration_pb2.Duration
    max_iterations: int
    max_tasks: int
    def __init__(self, max_cost: _Optional[float] = ..., max_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_iterations: _Optional[int] = ..., max_tasks: _Optional[int] = ...) -> None: ...

class Notify(_message.Message):
    __slots__ = ("webhook_url", "reply_topic")
    WEBHOOK_URL_FIELD_NUMBER: _ClassVar[int]
    REPLY_TOPIC_FIELD_NUMBER: _ClassVar[int]
    webhook_url: str
    reply_topic: str
    def __init__(self, webhook_url: _Optional[str] = ..., reply_topic: _Optional[str] = ...) -> None: ...
