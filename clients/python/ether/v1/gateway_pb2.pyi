import datetime

from ether.v1 import agent_io_pb2 as _agent_io_pb2
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

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATE_UNSPECIFIED: _ClassVar[SessionState]
    SESSION_STATE_OPEN: _ClassVar[SessionState]
    SESSION_STATE_CLOSED: _ClassVar[SessionState]

class AuditDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUDIT_DECISION_UNSPECIFIED: _ClassVar[AuditDecision]
    AUDIT_DECISION_ALLOWED: _ClassVar[AuditDecision]
    AUDIT_DECISION_DENIED: _ClassVar[AuditDecision]
SESSION_STATE_UNSPECIFIED: SessionState
SESSION_STATE_OPEN: SessionState
SESSION_STATE_CLOSED: SessionState
AUDIT_DECISION_UNSPECIFIED: AuditDecision
AUDIT_DECISION_ALLOWED: AuditDecision
AUDIT_DECISION_DENIED: AuditDecision

class PipelineTrigger(_message.Message):
    __slots__ = ("every", "at_turns", "when")
    EVERY_FIELD_NUMBER: _ClassVar[int]
    AT_TURNS_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    every: int
    at_turns: _containers.RepeatedScalarFieldContainer[int]
    when: str
    def __init__(self, every: _Optional[int] = ..., at_turns: _Optional[_Iterable[int]] = ..., when: _Optional[str] = ...) -> None: ...

class PipelineStep(_message.Message):
    __slots__ = ("name", "agent", "action", "params", "parallel_group", "trigger", "reply", "output_key", "timeout")
    NAME_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_GROUP_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    name: str
    agent: str
    action: str
    params: _struct_pb2.Struct
    parallel_group: str
    trigger: PipelineTrigger
    reply: bool
    output_key: str
    timeout: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., agent: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., parallel_group: _Optional[str] = ..., trigger: _Optional[_Union[PipelineTrigger, _Mapping]] = ..., reply: _Optional[bool] = ..., output_key: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class PipelineSpec(_message.Message):
    __slots__ = ("steps", "turn_timeout")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TURN_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    steps: _containers.RepeatedCompositeFieldContainer[PipelineStep]
    turn_timeout: _duration_pb2.Duration
    def __init__(self, steps: _Optional[_Iterable[_Union[PipelineStep, _Mapping]]] = ..., turn_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("id", "owner", "agent", "capability", "state", "pipeline", "metadata", "turns", "context_version", "last_sequence", "created_at", "last_activity_at", "closed_at", "idle_timeout", "notify")
    ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_ACTIVITY_AT_FIELD_NUMBER: _ClassVar[int]
    CLOSED_AT_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    id: str
    owner: str
    agent: str
    capability: str
    state: SessionState
    pipeline: PipelineSpec
    metadata: _struct_pb2.Struct
    turns: int
    context_version: int
    last_sequence: int
    created_at: _timestamp_pb2.Timestamp
    last_activity_at: _timestamp_pb2.Timestamp
    closed_at: _timestamp_pb2.Timestamp
    idle_timeout: _duration_pb2.Duration
    notify: _common_pb2.Notify
    def __init__(self, id: _Optional[str] = ..., owner: _Optional[str] = ..., agent: _Optional[str] = ..., capability: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ..., pipeline: _Optional[_Union[PipelineSpec, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., turns: _Optional[int] = ..., context_version: _Optional[int] = ..., last_sequence: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_activity_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., closed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., notify: _Optional[_Union[_common_pb2.Notify, _Mapping]] = ...) -> None: ...

class ContextChange(_message.Message):
    __slots__ = ("version", "keys", "values", "author")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    version: int
    keys: _containers.RepeatedScalarFieldContainer[str]
    values: _struct_pb2.Struct
    author: str
    def __init__(self, version: _Optional[int] = ..., keys: _Optional[_Iterable[str]] = ..., values: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., author: _Optional[str] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ("agent", "capability", "pipeline", "context", "metadata", "idle_timeout", "request_id", "notify")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    agent: str
    capability: str
    pipeline: PipelineSpec
    context: _struct_pb2.Struct
    metadata: _struct_pb2.Struct
    idle_timeout: _duration_pb2.Duration
    request_id: str
    notify: _common_pb2.Notify
    def __init__(self, agent: _Optional[str] = ..., capability: _Optional[str] = ..., pipeline: _Optional[_Union[PipelineSpec, _Mapping]] = ..., context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., request_id: _Optional[str] = ..., notify: _Optional[_Union[_common_pb2.Notify, _Mapping]] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "state")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    state: SessionState
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., state: _Optional[_Union[SessionState, str]] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id", "reason")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    reason: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: Session
    def __init__(self, session: _Optional[_Union[Session, _Mapping]] = ...) -> None: ...

class ConverseStart(_message.Message):
    __slots__ = ("session_id", "after_sequence")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    after_sequence: int
    def __init__(self, session_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class UserMessage(_message.Message):
    __slots__ = ("text", "data", "client_message_id")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    text: str
    data: _struct_pb2.Struct
    client_message_id: str
    def __init__(self, text: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., client_message_id: _Optional[str] = ...) -> None: ...

class ConverseRequest(_message.Message):
    __slots__ = ("start", "message")
    START_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    start: ConverseStart
    message: UserMessage
    def __init__(self, start: _Optional[_Union[ConverseStart, _Mapping]] = ..., message: _Optional[_Union[UserMessage, _Mapping]] = ...) -> None: ...

class TurnAccepted(_message.Message):
    __slots__ = ("client_message_id", "queued_ahead")
    CLIENT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUED_AHEAD_FIELD_NUMBER: _ClassVar[int]
    client_message_id: str
    queued_ahead: int
    def __init__(self, client_message_id: _Optional[str] = ..., queued_ahead: _Optional[int] = ...) -> None: ...

class AgentReply(_message.Message):
    __slots__ = ("agent", "text", "data", "partial")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    agent: str
    text: str
    data: _struct_pb2.Value
    partial: bool
    def __init__(self, agent: _Optional[str] = ..., text: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., partial: _Optional[bool] = ...) -> None: ...

class TurnProgress(_message.Message):
    __slots__ = ("step", "progress", "total", "message")
    STEP_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    step: str
    progress: float
    total: float
    message: str
    def __init__(self, step: _Optional[str] = ..., progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class TurnError(_message.Message):
    __slots__ = ("step", "error")
    STEP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    step: str
    error: _agent_io_pb2.TaskError
    def __init__(self, step: _Optional[str] = ..., error: _Optional[_Union[_agent_io_pb2.TaskError, _Mapping]] = ...) -> None: ...

class AgentFailover(_message.Message):
    __slots__ = ("from_agent", "to_agent", "reason")
    FROM_AGENT_FIELD_NUMBER: _ClassVar[int]
    TO_AGENT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    from_agent: str
    to_agent: str
    reason: str
    def __init__(self, from_agent: _Optional[str] = ..., to_agent: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CustomEvent(_message.Message):
    __slots__ = ("type", "data", "agent")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    type: str
    data: _struct_pb2.Value
    agent: str
    def __init__(self, type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., agent: _Optional[str] = ...) -> None: ...

class PipelineStepCompleted(_message.Message):
    __slots__ = ("step", "agent", "action", "task_id", "status", "latency")
    STEP_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    step: str
    agent: str
    action: str
    task_id: str
    status: _agent_io_pb2.TaskStatus
    latency: _duration_pb2.Duration
    def __init__(self, step: _Optional[str] = ..., agent: _Optional[str] = ..., action: _Optional[str] = ..., task_id: _Optional[str] = ..., status: _Optional[_Union[_agent_io_pb2.TaskStatus, str]] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class TurnCompleted(_message.Message):
    __slots__ = ("latency", "steps_run")
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    STEPS_RUN_FIELD_NUMBER: _ClassVar[int]
    latency: _duration_pb2.Duration
    steps_run: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., steps_run: _Optional[_Iterable[str]] = ...) -> None: ...

class SessionClosed(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ConverseResponse(_message.Message):
    __slots__ = ("sequence", "time", "turn", "accepted", "reply", "context_changed", "progress", "error", "agent_failover", "custom", "step_completed", "turn_completed", "session_closed")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_CHANGED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AGENT_FAILOVER_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_FIELD_NUMBER: _ClassVar[int]
    STEP_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    TURN_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SESSION_CLOSED_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    time: _timestamp_pb2.Timestamp
    turn: int
    accepted: TurnAccepted
    reply: AgentReply
    context_changed: ContextChange
    progress: TurnProgress
    error: TurnError
    agent_failover: AgentFailover
    custom: CustomEvent
    step_completed: PipelineStepCompleted
    turn_completed: TurnCompleted
    session_closed: SessionClosed
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., turn: _Optional[int] = ..., accepted: _Optional[_Union[TurnAccepted, _Mapping]] = ..., reply: _Optional[_Union[AgentReply, _Mapping]] = ..., context_changed: _Optional[_Union[ContextChange, _Mapping]] = ..., progress: _Optional[_Union[TurnProgress, _Mapping]] = ..., error: _Optional[_Union[TurnError, _Mapping]] = ..., agent_failover: _Optional[_Union[AgentFailover, _Mapping]] = ..., custom: _Optional[_Union[CustomEvent, _Mapping]] = ..., step_completed: _Optional[_Union[PipelineStepCompleted, _Mapping]] = ..., turn_completed: _Optional[_Union[TurnCompleted, _Mapping]] = ..., session_closed: _Optional[_Union[SessionClosed, _Mapping]] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("session_id", "keys")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("context", "version", "updated_at")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    context: _struct_pb2.Struct
    version: int
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., version: _Optional[int] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ContextKeys(_message.Message):
    __slots__ = ("keys",)
    KEYS_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, keys: _Optional[_Iterable[str]] = ...) -> None: ...

class UpdateContextRequest(_message.Message):
    __slots__ = ("session_id", "expected_version", "set", "merge_patch", "remove", "replace")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SET_FIELD_NUMBER: _ClassVar[int]
    MERGE_PATCH_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    expected_version: int
    set: _struct_pb2.Struct
    merge_patch: _struct_pb2.Struct
    remove: ContextKeys
    replace: _struct_pb2.Struct
    def __init__(self, session_id: _Optional[str] = ..., expected_version: _Optional[int] = ..., set: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., merge_patch: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., remove: _Optional[_Union[ContextKeys, _Mapping]] = ..., replace: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UpdateContextResponse(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: ContextChange
    def __init__(self, change: _Optional[_Union[ContextChange, _Mapping]] = ...) -> None: ...

class WatchContextRequest(_message.Message):
    __slots__ = ("session_id", "after_version")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    after_version: int
    def __init__(self, session_id: _Optional[str] = ..., after_version: _Optional[int] = ...) -> None: ...

class ContextSnapshot(_message.Message):
    __slots__ = ("context", "version")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    context: _struct_pb2.Struct
    version: int
    def __init__(self, context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., version: _Optional[int] = ...) -> None: ...

class WatchContextResponse(_message.Message):
    __slots__ = ("time", "snapshot", "change", "session_closed")
    TIME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_CLOSED_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    snapshot: ContextSnapshot
    change: ContextChange
    session_closed: SessionClosed
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., snapshot: _Optional[_Union[ContextSnapshot, _Mapping]] = ..., change: _Optional[_Union[ContextChange, _Mapping]] = ..., session_closed: _Optional[_Union[SessionClosed, _Mapping]] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("id", "sequence", "sender", "agent", "topic", "type", "data", "correlation_id", "session_id", "sent_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    sequence: int
    sender: str
    agent: str
    topic: str
    type: str
    data: _struct_pb2.Value
    correlation_id: str
    session_id: str
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., sequence: _Optional[int] = ..., sender: _Optional[str] = ..., agent: _Optional[str] = ..., topic: _Optional[str] = ..., type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., correlation_id: _Optional[str] = ..., session_id: _Optional[str] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("agent", "type", "data", "correlation_id", "session_id", "request_id")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    type: str
    data: _struct_pb2.Value
    correlation_id: str
    session_id: str
    request_id: str
    def __init__(self, agent: _Optional[str] = ..., type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., correlation_id: _Optional[str] = ..., session_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("message", "mailbox_depth")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MAILBOX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    message: AgentMessage
    mailbox_depth: int
    def __init__(self, message: _Optional[_Union[AgentMessage, _Mapping]] = ..., mailbox_depth: _Optional[int] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("agent", "topic", "after_sequence")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    agent: str
    topic: str
    after_sequence: int
    def __init__(self, agent: _Optional[str] = ..., topic: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class SubscriptionLagged(_message.Message):
    __slots__ = ("dropped", "first_dropped_sequence")
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    FIRST_DROPPED_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    dropped: int
    first_dropped_sequence: int
    def __init__(self, dropped: _Optional[int] = ..., first_dropped_sequence: _Optional[int] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("message", "lagged")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAGGED_FIELD_NUMBER: _ClassVar[int]
    message: AgentMessage
    lagged: SubscriptionLagged
    def __init__(self, message: _Optional[_Union[AgentMessage, _Mapping]] = ..., lagged: _Optional[_Union[SubscriptionLagged, _Mapping]] = ...) -> None: ...

class PublishRequest(_message.Message):
    __slots__ = ("topic", "type", "data", "correlation_id", "session_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    type: str
    data: _struct_pb2.Value
    correlation_id: str
    session_id: str
    def __init__(self, topic: _Optional[str] = ..., type: _Optional[str] = ..., data: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., correlation_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class PublishResponse(_message.Message):
    __slots__ = ("message", "subscribers")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBERS_FIELD_NUMBER: _ClassVar[int]
    message: AgentMessage
    subscribers: int
    def __init__(self, message: _Optional[_Union[AgentMessage, _Mapping]] = ..., subscribers: _Optional[int] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("id", "time", "agent", "task_id", "session_id", "method", "url", "host", "port", "resolved_address", "decision", "reason", "rule", "status_code", "request_bytes", "response_bytes", "duration", "redirect_depth", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_BYTES_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_DEPTH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: int
    time: _timestamp_pb2.Timestamp
    agent: str
    task_id: str
    session_id: str
    method: str
    url: str
    host: str
    port: int
    resolved_address: str
    decision: AuditDecision
    reason: str
    rule: str
    status_code: int
    request_bytes: int
    response_bytes: int
    duration: _duration_pb2.Duration
    redirect_depth: int
    error: str
    def __init__(self, id: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent: _Optional[str] = ..., task_id: _Optional[str] = ..., session_id: _Optional[str] = ..., method: _Optional[str] = ..., url: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., resolved_address: _Optional[str] = ..., decision: _Optional[_Union[AuditDecision, str]] = ..., reason: _Optional[str] = ..., rule: _Optional[str] = ..., status_code: _Optional[int] = ..., request_bytes: _Optional[int] = ..., response_bytes: _Optional[int] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., redirect_depth: _Optional[int] = ..., error: _Optional[str] = ...) -> None: ...

class ListAuditRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "agent", "decision", "start_time", "end_time", "host")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    agent: str
    decision: AuditDecision
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    host: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., agent: _Optional[str] = ..., decision: _Optional[_Union[AuditDecision, str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., host: _Optional[str] = ...) -> None: ...

class ListAuditResponse(_message.Message):
    __slots__ = ("records", "next_page_token")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[AuditRecord]
    next_page_token: str
    def __init__(self, records: _Optional[_Iterable[_Union[AuditRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchAuditRequest(_message.Message):
    __slots__ = ("agent", "decision", "host", "after_id")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    decision: AuditDecision
    host: str
    after_id: int
    def __init__(self, agent: _Optional[str] = ..., decision: _Optional[_Union[AuditDecision, str]] = ..., host: _Optional[str] = ..., after_id: _Optional[int] = ...) -> None: ...

class WatchAuditResponse(_message.Message):
    __slots__ = ("record",)
    RECORD_FIELD_NUMBER: _ClassVar[int]
    record: AuditRecord
    def __init__(self, record: _Optional[_Union[AuditRecord, _Mapping]] = ...) -> None: ...
