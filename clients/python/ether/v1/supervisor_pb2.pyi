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

class RestartPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESTART_POLICY_UNSPECIFIED: _ClassVar[RestartPolicy]
    RESTART_POLICY_ALWAYS: _ClassVar[RestartPolicy]
    RESTART_POLICY_ON_FAILURE: _ClassVar[RestartPolicy]
    RESTART_POLICY_NEVER: _ClassVar[RestartPolicy]

class LinkProtocol(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINK_PROTOCOL_UNSPECIFIED: _ClassVar[LinkProtocol]
    LINK_PROTOCOL_AUTO: _ClassVar[LinkProtocol]
    LINK_PROTOCOL_LEGACY: _ClassVar[LinkProtocol]
    LINK_PROTOCOL_MCP: _ClassVar[LinkProtocol]

class CpuSchedulingPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CPU_SCHEDULING_POLICY_UNSPECIFIED: _ClassVar[CpuSchedulingPolicy]
    CPU_SCHEDULING_POLICY_BATCH: _ClassVar[CpuSchedulingPolicy]
    CPU_SCHEDULING_POLICY_OTHER: _ClassVar[CpuSchedulingPolicy]
    CPU_SCHEDULING_POLICY_IDLE: _ClassVar[CpuSchedulingPolicy]
RESTART_POLICY_UNSPECIFIED: RestartPolicy
RESTART_POLICY_ALWAYS: RestartPolicy
RESTART_POLICY_ON_FAILURE: RestartPolicy
RESTART_POLICY_NEVER: RestartPolicy
LINK_PROTOCOL_UNSPECIFIED: LinkProtocol
LINK_PROTOCOL_AUTO: LinkProtocol
LINK_PROTOCOL_LEGACY: LinkProtocol
LINK_PROTOCOL_MCP: LinkProtocol
CPU_SCHEDULING_POLICY_UNSPECIFIED: CpuSchedulingPolicy
CPU_SCHEDULING_POLICY_BATCH: CpuSchedulingPolicy
CPU_SCHEDULING_POLICY_OTHER: CpuSchedulingPolicy
CPU_SCHEDULING_POLICY_IDLE: CpuSchedulingPolicy

class AgentInstall(_message.Message):
    __slots__ = ("npm", "pip")
    NPM_FIELD_NUMBER: _ClassVar[int]
    PIP_FIELD_NUMBER: _ClassVar[int]
    npm: bool
    pip: bool
    def __init__(self, npm: _Optional[bool] = ..., pip: _Optional[bool] = ...) -> None: ...

class AgentSpec(_message.Message):
    __slots__ = ("name", "path", "language", "type", "replicas", "restart", "module", "function", "env", "config", "capabilities", "allowed_calls", "start_timeout", "stop_grace", "max_frame", "description", "command", "main", "protocol", "max_queue", "cancel_grace", "cpu_scheduling_policy", "ping_interval", "ping_timeout", "backoff_base", "backoff_cap", "start_retries", "max_restarts", "restart_period", "stable_after", "reset_after", "install", "max_concurrency")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    RESTART_FIELD_NUMBER: _ClassVar[int]
    MODULE_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_CALLS_FIELD_NUMBER: _ClassVar[int]
    START_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    STOP_GRACE_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    MAIN_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_GRACE_FIELD_NUMBER: _ClassVar[int]
    CPU_SCHEDULING_POLICY_FIELD_NUMBER: _ClassVar[int]
    PING_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    PING_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_BASE_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_CAP_FIELD_NUMBER: _ClassVar[int]
    START_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESTART_PERIOD_FIELD_NUMBER: _ClassVar[int]
    STABLE_AFTER_FIELD_NUMBER: _ClassVar[int]
    RESET_AFTER_FIELD_NUMBER: _ClassVar[int]
    INSTALL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    name: str
    path: str
    language: _common_pb2.Language
    type: _agent_io_pb2.AgentType
    replicas: int
    restart: RestartPolicy
    module: str
    function: str
    env: _containers.ScalarMap[str, str]
    config: _struct_pb2.Struct
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    allowed_calls: _containers.RepeatedScalarFieldContainer[str]
    start_timeout: _duration_pb2.Duration
    stop_grace: _duration_pb2.Duration
    max_frame: int
    description: str
    command: _containers.RepeatedScalarFieldContainer[str]
    main: str
    protocol: LinkProtocol
    max_queue: int
    cancel_grace: _duration_pb2.Duration
    cpu_scheduling_policy: CpuSchedulingPolicy
    ping_interval: _duration_pb2.Duration
    ping_timeout: _duration_pb2.Duration
    backoff_base: _duration_pb2.Duration
    backoff_cap: _duration_pb2.Duration
    start_retries: int
    max_restarts: int
    restart_period: _duration_pb2.Duration
    stable_after: _duration_pb2.Duration
    reset_after: _duration_pb2.Duration
    install: AgentInstall
    max_concurrency: int
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., language: _Optional[_Union[_common_pb2.Language, str]] = ..., type: _Optional[_Union[_agent_io_pb2.AgentType, str]] = ..., replicas: _Optional[int] = ..., restart: _Optional[_Union[RestartPolicy, str]] = ..., module: _Optional[str] = ..., function: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., capabilities: _Optional[_Iterable[str]] = ..., allowed_calls: _Optional[_Iterable[str]] = ..., start_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., stop_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_frame: _Optional[int] = ..., description: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., main: _Optional[str] = ..., protocol: _Optional[_Union[LinkProtocol, str]] = ..., max_queue: _Optional[int] = ..., cancel_grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cpu_scheduling_policy: _Optional[_Union[CpuSchedulingPolicy, str]] = ..., ping_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., ping_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_base: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., backoff_cap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., start_retries: _Optional[int] = ..., max_restarts: _Optional[int] = ..., restart_period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., stable_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., reset_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., install: _Optional[_Union[AgentInstall, _Mapping]] = ..., max_concurrency: _Optional[int] = ...) -> None: ...

class ProcessInfo(_message.Message):
    __slots__ = ("agent", "replica", "pid", "state", "started_at", "restarts", "in_flight", "last_exit_code", "last_signal", "reason", "noise_lines", "protocol_errors")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LAST_EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    LAST_SIGNAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NOISE_LINES_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_ERRORS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    replica: int
    pid: int
    state: _agent_io_pb2.AgentState
    started_at: _timestamp_pb2.Timestamp
    restarts: int
    in_flight: int
    last_exit_code: int
    last_signal: int
    reason: str
    noise_lines: int
    protocol_errors: int
    def __init__(self, agent: _Optional[str] = ..., replica: _Optional[int] = ..., pid: _Optional[int] = ..., state: _Optional[_Union[_agent_io_pb2.AgentState, str]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., restarts: _Optional[int] = ..., in_flight: _Optional[int] = ..., last_exit_code: _Optional[int] = ..., last_signal: _Optional[int] = ..., reason: _Optional[str] = ..., noise_lines: _Optional[int] = ..., protocol_errors: _Optional[int] = ...) -> None: ...

class AgentStatus(_message.Message):
    __slots__ = ("info", "spec", "processes", "reason", "event_sequence")
    INFO_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EVENT_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    info: _agent_io_pb2.AgentInfo
    spec: AgentSpec
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    reason: str
    event_sequence: int
    def __init__(self, info: _Optional[_Union[_agent_io_pb2.AgentInfo, _Mapping]] = ..., spec: _Optional[_Union[AgentSpec, _Mapping]] = ..., processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ..., reason: _Optional[str] = ..., event_sequence: _Optional[int] = ...) -> None: ...

class DeployAgentRequest(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: AgentSpec
    def __init__(self, spec: _Optional[_Union[AgentSpec, _Mapping]] = ...) -> None: ...

class DeployAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentStatus
    def __init__(self, agent: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class RemoveAgentRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RemoveAgentResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StartAgentRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class StartAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentStatus
    def __init__(self, agent: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class StopAgentRequest(_message.Message):
    __slots__ = ("name", "grace")
    NAME_FIELD_NUMBER: _ClassVar[int]
    GRACE_FIELD_NUMBER: _ClassVar[int]
    name: str
    grace: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., grace: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class StopAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentStatus
    def __init__(self, agent: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class RestartAgentRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RestartAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentStatus
    def __init__(self, agent: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class ScaleAgentRequest(_message.Message):
    __slots__ = ("name", "replicas")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    name: str
    replicas: int
    def __init__(self, name: _Optional[str] = ..., replicas: _Optional[int] = ...) -> None: ...

class ScaleAgentResponse(_message.Message):
    __slots__ = ("agent",)
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentStatus
    def __init__(self, agent: _Optional[_Union[AgentStatus, _Mapping]] = ...) -> None: ...

class ListProcessesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "agent")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    agent: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class ListProcessesResponse(_message.Message):
    __slots__ = ("processes", "next_page_token")
    PROCESSES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    processes: _containers.RepeatedCompositeFieldContainer[ProcessInfo]
    next_page_token: str
    def __init__(self, processes: _Optional[_Iterable[_Union[ProcessInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("agent", "after_sequence", "host")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    agent: str
    after_sequence: int
    host: str
    def __init__(self, agent: _Optional[str] = ..., after_sequence: _Optional[int] = ..., host: _Optional[str] = ...) -> None: ...

class WatchEventsResponse(_message.Message):
    __slots__ = ("sequence", "time", "agent", "replica", "state", "previous_state", "reason", "pid", "exit_code", "signal", "stderr_tail", "host")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    time: _timestamp_pb2.Timestamp
    agent: str
    replica: int
    state: _agent_io_pb2.AgentState
    previous_state: _agent_io_pb2.AgentState
    reason: str
    pid: int
    exit_code: int
    signal: int
    stderr_tail: _containers.RepeatedScalarFieldContainer[str]
    host: str
    def __init__(self, sequence: _Optional[int] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent: _Optional[str] = ..., replica: _Optional[int] = ..., state: _Optional[_Union[_agent_io_pb2.AgentState, str]] = ..., previous_state: _Optional[_Union[_agent_io_pb2.AgentState, str]] = ..., reason: _Optional[str] = ..., pid: _Optional[int] = ..., exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., stderr_tail: _Optional[_Iterable[str]] = ..., host: _Optional[str] = ...) -> None: ...

class StreamLogsRequest(_message.Message):
    __slots__ = ("agent", "tail_lines", "follow")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TAIL_LINES_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    agent: str
    tail_lines: int
    follow: bool
    def __init__(self, agent: _Optional[str] = ..., tail_lines: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class StreamLogsResponse(_message.Message):
    __slots__ = ("time", "agent", "replica", "pid", "source", "level", "message", "fields")
    TIME_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    agent: str
    replica: int
    pid: int
    source: str
    level: str
    message: str
    fields: _struct_pb2.Struct
    def __init__(self, time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent: _Optional[str] = ..., replica: _Optional[int] = ..., pid: _Optional[int] = ..., source: _Optional[str] = ..., level: _Optional[str] = ..., message: _Optional[str] = ..., fields: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetHostInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetHostInfoResponse(_message.Message):
    __slots__ = ("host",)
    HOST_FIELD_NUMBER: _ClassVar[int]
    host: HostInfo
    def __init__(self, host: _Optional[_Union[HostInfo, _Mapping]] = ...) -> None: ...

class HostInfo(_message.Message):
    __slots__ = ("version", "listeners", "auth", "tls", "client_certificates", "isolation", "started_at", "cluster")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    AUTH_FIELD_NUMBER: _ClassVar[int]
    TLS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    version: str
    listeners: _containers.RepeatedScalarFieldContainer[str]
    auth: bool
    tls: bool
    client_certificates: bool
    isolation: Isolation
    started_at: _timestamp_pb2.Timestamp
    cluster: ClusterMembership
    def __init__(self, version: _Optional[str] = ..., listeners: _Optional[_Iterable[str]] = ..., auth: _Optional[bool] = ..., tls: _Optional[bool] = ..., client_certificates: _Optional[bool] = ..., isolation: _Optional[_Union[Isolation, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cluster: _Optional[_Union[ClusterMembership, _Mapping]] = ...) -> None: ...

class ClusterMembership(_message.Message):
    __slots__ = ("host_name", "advertise", "redis", "degraded", "hosts", "unreachable")
    HOST_NAME_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_FIELD_NUMBER: _ClassVar[int]
    REDIS_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    HOSTS_FIELD_NUMBER: _ClassVar[int]
    UNREACHABLE_FIELD_NUMBER: _ClassVar[int]
    host_name: str
    advertise: str
    redis: str
    degraded: str
    hosts: _containers.RepeatedScalarFieldContainer[str]
    unreachable: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, host_name: _Optional[str] = ..., advertise: _Optional[str] = ..., redis: _Optional[str] = ..., degraded: _Optional[str] = ..., hosts: _Optional[_Iterable[str]] = ..., unreachable: _Optional[_Iterable[str]] = ...) -> None: ...

class Isolation(_message.Message):
    __slots__ = ("sandbox_mode", "sandboxed", "bubblewrap", "pid_namespaces", "namespaces", "why_not", "limits")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SANDBOX_MODE_FIELD_NUMBER: _ClassVar[int]
    SANDBOXED_FIELD_NUMBER: _ClassVar[int]
    BUBBLEWRAP_FIELD_NUMBER: _ClassVar[int]
    PID_NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    WHY_NOT_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    sandbox_mode: str
    sandboxed: bool
    bubblewrap: str
    pid_namespaces: bool
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    why_not: str
    limits: _containers.ScalarMap[str, str]
    def __init__(self, sandbox_mode: _Optional[str] = ..., sandboxed: _Optional[bool] = ..., bubblewrap: _Optional[str] = ..., pid_namespaces: _Optional[bool] = ..., namespaces: _Optional[_Iterable[str]] = ..., why_not: _Optional[str] = ..., limits: _Optional[_Mapping[str, str]] = ...) -> None: ...
