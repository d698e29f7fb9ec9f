import datetime

from ether.v1 import common_pb2 as _common_pb2
from ether.v1 import rules_pb2 as _rules_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATUS_UNSPECIFIED: _ClassVar[TaskStatus]
    TASK_STATUS_SUCCESS: _ClassVar[TaskStatus]
    TASK_STATUS_ERROR: _ClassVar[TaskStatus]
    TASK_STATUS_PARTIAL: _ClassVar[TaskStatus]

class AgentType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_TYPE_UNSPECIFIED: _ClassVar[AgentType]
    AGENT_TYPE_GENERAL: _ClassVar[AgentType]
    AGENT_TYPE_IO_GATEWAY: _ClassVar[AgentType]

class AgentState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_STATE_UNSPECIFIED: _ClassVar[AgentState]
    AGENT_STATE_INSTALLING: _ClassVar[AgentState]
    AGENT_STATE_STARTING: _ClassVar[AgentState]
    AGENT_STATE_RUNNING: _ClassVar[AgentState]
    AGENT_STATE_BACKOFF: _ClassVar[AgentState]
    AGENT_STATE_STOPPING: _ClassVar[AgentState]
    AGENT_STATE_STOPPED: _ClassVar[AgentState]
    AGENT_STATE_EXITED: _ClassVar[AgentState]
    AGENT_STATE_FATAL: _ClassVar[AgentState]

class DataEncoding(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA_ENCODING_UNSPECIFIED: _ClassVar[DataEncoding]
    DATA_ENCODING_STRUCT: _ClassVar[DataEncoding]
    DATA_ENCODING_JSON: _ClassVar[DataEncoding]
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_SUCCESS: TaskStatus
TASK_STATUS_ERROR: TaskStatus
TASK_STATUS_PARTIAL: TaskStatus
AGENT_TYPE_UNSPECIFIED: AgentType
AGENT_TYPE_GENERAL: AgentType
AGENT_TYPE_IO_GATEWAY: AgentType
AGENT_STATE_UNSPECIFIED: AgentState
AGENT_STATE_INSTALLING: AgentState
AGENT_STATE_STARTING: AgentState
AGENT_STATE_RUNNING: AgentState
AGENT_STATE_BACKOFF: AgentState
AGENT_STATE_STOPPING: AgentState
AGENT_STATE_STOPPED: AgentState
AGENT_STATE_EXITED: AgentState
AGENT_STATE_FATAL: AgentState
DATA_ENCODING_UNSPECIFIED: DataEncoding
DATA_ENCODING_STRUCT: DataEncoding
DATA_ENCODING_JSON: DataEncoding

class ActionSpec(_message.Message):
    __slots__ = ("name", "description", "params_schema", "idempotent", "result_schema", "unusable", "cache_ttl")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    RESULT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    UNUSABLE_FIELD_NUMBER: _ClassVar[int]
    CACHE_TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    params_schema: _struct_pb2.Struct
    idempotent: bool
    result_schema: _struct_pb2.Struct
    unusable: str
    cache_ttl: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., params_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotent: _Optional[bool] = ..., result_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., unusable: _Optional[str] = ..., cache_ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class AgentInfo(_message.Message):
    __slots__ = ("name", "type", "language", "version", "description", "actions", "capabilities", "state", "replicas", "ready_replicas", "in_flight", "queued", "max_concurrency", "hosts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: AgentType
    language: _common_pb2.Language
    version: str
    description: str
    actions: _containers.RepeatedCompositeFieldContainer[ActionSpec]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    state: AgentState
    replicas: int
    ready_replicas: int
    in_flight: int
    queued: int
    max_concurrency: int
    hosts: _containers.RepeatedCompositeFieldContainer[AgentHost]
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[AgentType, str]] = ..., language: _Optional[_Union[_common_pb2.Language, str]] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., actions: _Optional[_Iterable[_Union[ActionSpec, _Mapping]]] = ..., capabilities: _Optional[_Iterable[str]] = ..., state: _Optional[_Union[AgentState, str]] = ..., replicas: _Optional[int] = ..., ready_replicas: _Optional[int] = ..., in_flight: _Optional[int] = ..., queued: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., hosts: _Optional[_Iterable[_Union[AgentHost, _Mapping]]] = ...) -> None: ...

class AgentHost(_message.Message):
    __slots__ = ("host", "address", "state", "replicas", "ready_replicas", "in_flight", "queued", "local")
    HOST_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    host: str
    address: str
    state: AgentState
    replicas: int
    ready_replicas: int
    in_flight: int
    queued: int
    local: bool
    def __init__(self, host: _Optional[str] = ..., address: _Optional[str] = ..., state: _Optional[_Union[AgentState, str]] = ..., replicas: _Optional[int] = ..., ready_replicas: _Optional[int] = ..., in_flight: _Optional[int] = ..., queued: _Optional[int] = ..., local: _Optional[bool] = ...) -> None: ...

class Trace(_message.Message):
    __slots__ = ("root_task_id", "parent_task_id", "depth")
    ROOT_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    root_task_id: str
    parent_task_id: str
    depth: int
    def __init__(self, root_task_id: _Optional[str] = ..., parent_task_id: _Optional[str] = ..., depth: _Optional[int] = ...) -> None: ...

class TaskContext(_message.Message):
    __slots__ = ("parent_task", "workflow", "budget", "permissions", "trace", "session_id")
    PARENT_TASK_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    PERMISSIONS_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    parent_task: str
    workflow: str
    budget: _common_pb2.Budget
    permissions: _containers.RepeatedScalarFieldContainer[str]
    trace: Trace
    session_id: str
    def __init__(self, parent_task: _Optional[str] = ..., workflow: _Optional[str] = ..., budget: _Optional[_Union[_common_pb2.Budget, _Mapping]] = ..., permissions: _Optional[_Iterable[str]] = ..., trace: _Optional[_Union[Trace, _Mapping]] = ..., session_id: _Optional[str] = ...) -> None: ...

class AgentInput(_message.Message):
    __slots__ = ("task_id", "agent", "action", "params", "context", "idempotent", "params_json", "output_encoding", "force_refresh")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ENCODING_FIELD_NUMBER: _ClassVar[int]
    FORCE_REFRESH_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    agent: str
    action: str
    params: _struct_pb2.Struct
    context: TaskContext
    idempotent: bool
    params_json: bytes
    output_encoding: DataEncoding
    force_refresh: bool
    def __init__(self, task_id: _Optional[str] = ..., agent: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., context: _Optional[_Union[TaskContext, _Mapping]] = ..., idempotent: _Optional[bool] = ..., params_json: _Optional[bytes] = ..., output_encoding: _Optional[_Union[DataEncoding, str]] = ..., force_refresh: _Optional[bool] = ...) -> None: ...

class OutputMetadata(_message.Message):
    __slots__ = ("duration", "cost", "model", "started_at", "host", "pid", "attempt", "cached", "extra")
    DURATION_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    cost: float
    model: str
    started_at: _timestamp_pb2.Timestamp
    host: str
    pid: int
    attempt: int
    cached: bool
    extra: _struct_pb2.Struct
    def __init__(self, duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cost: _Optional[float] = ..., model: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ..., attempt: _Optional[int] = ..., cached: _Optional[bool] = ..., extra: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class TaskError(_message.Message):
    __slots__ = ("code", "message", "details", "retryable")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    details: _struct_pb2.Struct
    retryable: bool
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., details: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., retryable: _Optional[bool] = ...) -> None: ...

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

class AgentOutput(_message.Message):
    __slots__ = ("task_id", "status", "agent", "action", "data", "metadata", "error", "next_actions", "data_json")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NEXT_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    status: TaskStatus
    agent: str
    action: str
    data: _struct_pb2.Value
    metadata: OutputMetadata
    error: TaskError
    next_actions: _containers.RepeatedCompositeFieldContainer[NextAction]
    data_json: bytes
    def __init__(self, task_id: _Optional[str] = ..., status: _Optional[_Union[TaskStatus, str]] = ..., agent: _Optional[str] = ..., action: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., metadata: _Optional[_Union[OutputMetadata, _Mapping]] = ..., error: _Optional[_Union[TaskError, _Mapping]] = ..., next_actions: _Optional[_Iterable[_Union[NextAction, _Mapping]]] = ..., data_json: _Optional[bytes] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "capability", "language", "type")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    capability: str
    language: _common_pb2.Language
    type: AgentType
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., capability: _Optional[str] = ..., language: _Optional[_Union[_common_pb2.Language, str]] = ..., type: _Optional[_Union[AgentType, str]] = ...) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ("agents", "next_page_token")
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[AgentInfo]
    next_page_token: str
    def __init__(self, agents: _Optional[_Iterable[_Union[AgentInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetAgentRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentInfo
    def __init__(self, agent: _Optional[_Union[AgentInfo, _Mapping]] = ...) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ("input", "notify")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    input: AgentInput
    notify: _common_pb2.Notify
    def __init__(self, input: _Optional[_Union[AgentInput, _Mapping]] = ..., notify: _Optional[_Union[_common_pb2.Notify, _Mapping]] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("output",)
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    output: AgentOutput
    def __init__(self, output: _Optional[_Union[AgentOutput, _Mapping]] = ...) -> None: ...

class ExecuteStreamRequest(_message.Message):
    __slots__ = ("input", "notify")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    input: AgentInput
    notify: _common_pb2.Notify
    def __init__(self, input: _Optional[_Union[AgentInput, _Mapping]] = ..., notify: _Optional[_Union[_common_pb2.Notify, _Mapping]] = ...) -> None: ...

class TaskStarted(_message.Message):
    __slots__ = ("pid", "attempt")
    PID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    pid: int
    attempt: int
    def __init__(self, pid: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class TaskProgress(_message.Message):
    __slots__ = ("progress", "total", "message")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    progress: float
    total: float
    message: str
    def __init__(self, progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class TaskLog(_message.Message):
    __slots__ = ("level", "message", "fields")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    level: str
    message: str
    fields: _struct_pb2.Struct
    def __init__(self, level: _Optional[str] = ..., message: _Optional[str] = ..., fields: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ExecuteStreamResponse(_message.Message):
    __slots__ = ("sequence", "task_id", "time", "started", "progress", "log", "output")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    task_id: str
    time: _timestamp_pb2.Timestamp
    started: TaskStarted
    progress: TaskProgress
    log: TaskLog
    output: AgentOutput
    def __init__(self, sequence: _Optional[int] = ..., task_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started: _Optional[_Union[TaskStarted, _Mapping]] = ..., progress: _Optional[_Union[TaskProgress, _Mapping]] = ..., log: _Optional[_Union[TaskLog, _Mapping]] = ..., output: _Optional[_Union[AgentOutput, _Mapping]] = ...) -> None: ...

class PipeRequest(_message.Message):
    __slots__ = ("input", "max_in_flight", "inputs")
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MAX_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    input: AgentInput
    max_in_flight: int
    inputs: _containers.RepeatedCompositeFieldContainer[AgentInput]
    def __init__(self, input: _Optional[_Union[AgentInput, _Mapping]] = ..., max_in_flight: _Optional[int] = ..., inputs: _Optional[_Iterable[_Union[AgentInput, _Mapping]]] = ...) -> None: ...

class PipeResponse(_message.Message):
    __slots__ = ("output", "outputs")
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    output: AgentOutput
    outputs: _containers.RepeatedCompositeFieldContainer[AgentOutput]
    def __init__(self, output: _Optional[_Union[AgentOutput, _Mapping]] = ..., outputs: _Optional[_Iterable[_Union[AgentOutput, _Mapping]]] = ...) -> None: ...

class CancelTaskRequest(_message.Message):
    __slots__ = ("task_id", "reason")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    reason: str
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelTaskResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...
