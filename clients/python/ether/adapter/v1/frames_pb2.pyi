from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Hello(_message.Message):
    __slots__ = ("type", "protocol", "agent", "actions", "capabilities", "pid")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    type: str
    protocol: int
    agent: AgentIdentity
    actions: _containers.RepeatedCompositeFieldContainer[Action]
    capabilities: Capabilities
    pid: int
    def __init__(self, type: _Optional[str] = ..., protocol: _Optional[int] = ..., agent: _Optional[_Union[AgentIdentity, _Mapping]] = ..., actions: _Optional[_Iterable[_Union[Action, _Mapping]]] = ..., capabilities: _Optional[_Union[Capabilities, _Mapping]] = ..., pid: _Optional[int] = ...) -> None: ...

class AgentIdentity(_message.Message):
    __slots__ = ("name", "version", "language", "runtime", "description", "kind", "tags")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    language: str
    runtime: str
    description: str
    kind: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., language: _Optional[str] = ..., runtime: _Optional[str] = ..., description: _Optional[str] = ..., kind: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("name", "description", "params_schema", "idempotent", "cache_ttl")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    CACHE_TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    params_schema: _struct_pb2.Struct
    idempotent: bool
    cache_ttl: float
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., params_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotent: _Optional[bool] = ..., cache_ttl: _Optional[float] = ...) -> None: ...

class Capabilities(_message.Message):
    __slots__ = ("max_concurrency", "cancel", "progress", "ping", "calls", "max_frame")
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    PING_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_FIELD_NUMBER: _ClassVar[int]
    max_concurrency: int
    cancel: bool
    progress: bool
    ping: bool
    calls: _containers.RepeatedScalarFieldContainer[str]
    max_frame: int
    def __init__(self, max_concurrency: _Optional[int] = ..., cancel: _Optional[bool] = ..., progress: _Optional[bool] = ..., ping: _Optional[bool] = ..., calls: _Optional[_Iterable[str]] = ..., max_frame: _Optional[int] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("type", "protocol", "host_version", "max_frame", "max_in_flight", "config", "log_level", "error", "agent_name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    HOST_VERSION_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    LOG_LEVEL_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    type: str
    protocol: int
    host_version: str
    max_frame: int
    max_in_flight: int
    config: _struct_pb2.Struct
    log_level: str
    error: Error
    agent_name: str
    def __init__(self, type: _Optional[str] = ..., protocol: _Optional[int] = ..., host_version: _Optional[str] = ..., max_frame: _Optional[int] = ..., max_in_flight: _Optional[int] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., log_level: _Optional[str] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., agent_name: _Optional[str] = ...) -> None: ...

class Trace(_message.Message):
    __slots__ = ("root_id", "parent_id", "depth")
    ROOT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    root_id: str
    parent_id: str
    depth: int
    def __init__(self, root_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., depth: _Optional[int] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("type", "id", "action", "params", "deadline_ms", "attempt", "trace", "task_id", "session_id", "budget", "traceparent", "tracestate")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    action: str
    params: _struct_pb2.Struct
    deadline_ms: int
    attempt: int
    trace: Trace
    task_id: str
    session_id: str
    budget: _struct_pb2.Struct
    traceparent: str
    tracestate: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., deadline_ms: _Optional[int] = ..., attempt: _Optional[int] = ..., trace: _Optional[_Union[Trace, _Mapping]] = ..., task_id: _Optional[str] = ..., session_id: _Optional[str] = ..., budget: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class LegacyTask(_message.Message):
    __slots__ = ("id", "type", "payload")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    payload: _struct_pb2.Value
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message", "data", "retryable")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    data: _struct_pb2.Struct
    retryable: bool
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., retryable: _Optional[bool] = ...) -> None: ...

class ResultMetadata(_message.Message):
    __slots__ = ("cost", "model", "extra")
    COST_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    cost: float
    model: str
    extra: _struct_pb2.Struct
    def __init__(self, cost: _Optional[float] = ..., model: _Optional[str] = ..., extra: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class NextAction(_message.Message):
    __slots__ = ("agent", "action", "params", "reason")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    agent: str
    action: str
    params: _struct_pb2.Struct
    reason: str
    def __init__(self, agent: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("type", "id", "status", "result", "error", "metadata", "next_actions")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NEXT_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    status: str
    result: _struct_pb2.Value
    error: Error
    metadata: ResultMetadata
    next_actions: _containers.RepeatedCompositeFieldContainer[NextAction]
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., status: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ..., metadata: _Optional[_Union[ResultMetadata, _Mapping]] = ..., next_actions: _Optional[_Iterable[_Union[NextAction, _Mapping]]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("type", "id", "progress", "total", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    progress: float
    total: float
    message: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class Log(_message.Message):
    __slots__ = ("type", "level", "msg", "fields", "task_id", "logger")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MSG_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LOGGER_FIELD_NUMBER: _ClassVar[int]
    type: str
    level: str
    msg: str
    fields: _struct_pb2.Struct
    task_id: str
    logger: str
    def __init__(self, type: _Optional[str] = ..., level: _Optional[str] = ..., msg: _Optional[str] = ..., fields: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., task_id: _Optional[str] = ..., logger: _Optional[str] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("type", "id", "reason")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    reason: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Call(_message.Message):
    __slots__ = ("type", "id", "method", "params", "task_id", "deadline_ms", "traceparent", "tracestate")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_MS_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    method: str
    params: _struct_pb2.Struct
    task_id: str
    deadline_ms: int
    traceparent: str
    tracestate: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., method: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., task_id: _Optional[str] = ..., deadline_ms: _Optional[int] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class Reply(_message.Message):
    __slots__ = ("type", "id", "status", "result", "error")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    status: str
    result: _struct_pb2.Value
    error: Error
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ..., status: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[_Union[Error, _Mapping]] = ...) -> None: ...

class Ping(_message.Message):
    __slots__ = ("type", "id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class Pong(_message.Message):
    __slots__ = ("type", "id")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    type: str
    id: str
    def __init__(self, type: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class Shutdown(_message.Message):
    __slots__ = ("type", "grace_ms", "reason")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    type: str
    grace_ms: int
    reason: str
    def __init__(self, type: _Optional[str] = ..., grace_ms: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Fatal(_message.Message):
    __slots__ = ("type", "code", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    code: str
    message: str
    def __init__(self, type: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...
