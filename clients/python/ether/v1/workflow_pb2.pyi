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

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_PENDING: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_PARTIAL: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
    RUN_STATE_CANCELLED: _ClassVar[RunState]
    RUN_STATE_INTERRUPTED: _ClassVar[RunState]

class StageState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STAGE_STATE_UNSPECIFIED: _ClassVar[StageState]
    STAGE_STATE_PENDING: _ClassVar[StageState]
    STAGE_STATE_RUNNING: _ClassVar[StageState]
    STAGE_STATE_SUCCEEDED: _ClassVar[StageState]
    STAGE_STATE_PARTIAL: _ClassVar[StageState]
    STAGE_STATE_FAILED: _ClassVar[StageState]
    STAGE_STATE_SKIPPED: _ClassVar[StageState]
    STAGE_STATE_CANCELLED: _ClassVar[StageState]

class RunTaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_TASK_STATE_UNSPECIFIED: _ClassVar[RunTaskState]
    RUN_TASK_STATE_PENDING: _ClassVar[RunTaskState]
    RUN_TASK_STATE_RUNNING: _ClassVar[RunTaskState]
    RUN_TASK_STATE_RETRYING: _ClassVar[RunTaskState]
    RUN_TASK_STATE_SUCCEEDED: _ClassVar[RunTaskState]
    RUN_TASK_STATE_FAILED: _ClassVar[RunTaskState]
    RUN_TASK_STATE_CANCELLED: _ClassVar[RunTaskState]

class FailurePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_POLICY_UNSPECIFIED: _ClassVar[FailurePolicy]
    FAILURE_POLICY_STOP: _ClassVar[FailurePolicy]
    FAILURE_POLICY_CONTINUE: _ClassVar[FailurePolicy]

class ReportFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPORT_FORMAT_UNSPECIFIED: _ClassVar[ReportFormat]
    REPORT_FORMAT_JSON: _ClassVar[ReportFormat]
    REPORT_FORMAT_MARKDOWN: _ClassVar[ReportFormat]
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_PENDING: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_PARTIAL: RunState
RUN_STATE_FAILED: RunState
RUN_STATE_CANCELLED: RunState
RUN_STATE_INTERRUPTED: RunState
STAGE_STATE_UNSPECIFIED: StageState
STAGE_STATE_PENDING: StageState
STAGE_STATE_RUNNING: StageState
STAGE_STATE_SUCCEEDED: StageState
STAGE_STATE_PARTIAL: StageState
STAGE_STATE_FAILED: StageState
STAGE_STATE_SKIPPED: StageState
STAGE_STATE_CANCELLED: StageState
RUN_TASK_STATE_UNSPECIFIED: RunTaskState
RUN_TASK_STATE_PENDING: RunTaskState
RUN_TASK_STATE_RUNNING: RunTaskState
RUN_TASK_STATE_RETRYING: RunTaskState
RUN_TASK_STATE_SUCCEEDED: RunTaskState
RUN_TASK_STATE_FAILED: RunTaskState
RUN_TASK_STATE_CANCELLED: RunTaskState
FAILURE_POLICY_UNSPECIFIED: FailurePolicy
FAILURE_POLICY_STOP: FailurePolicy
FAILURE_POLICY_CONTINUE: FailurePolicy
REPORT_FORMAT_UNSPECIFIED: ReportFormat
REPORT_FORMAT_JSON: ReportFormat
REPORT_FORMAT_MARKDOWN: ReportFormat

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_backoff", "max_backoff", "multiplier", "retryable_only")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    MAX_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_ONLY_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_backoff: _duration_pb2.Duration
    max_backoff: _duration_pb2.Duration
    multiplier: float
    retryable_only: bool
    def __init__(self, max_attempts: _Optional[int] = ..., initial_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_backoff: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., multiplier: _Optional[float] = ..., retryable_only: _Optional[bool] = ...) -> None: ...

class FollowNextActions(_message.Message):
    __slots__ = ("max_actions", "max_depth", "allowed_agents")
    MAX_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_AGENTS_FIELD_NUMBER: _ClassVar[int]
    max_actions: int
    max_depth: int
    allowed_agents: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_actions: _Optional[int] = ..., max_depth: _Optional[int] = ..., allowed_agents: _Optional[_Iterable[str]] = ...) -> None: ...

class StageAction(_message.Message):
    __slots__ = ("agent", "action", "params")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    agent: str
    action: str
    params: _struct_pb2.Struct
    def __init__(self, agent: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ReduceSpec(_message.Message):
    __slots__ = ("include_failed", "outputs")
    INCLUDE_FAILED_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    include_failed: bool
    outputs: bool
    def __init__(self, include_failed: _Optional[bool] = ..., outputs: _Optional[bool] = ...) -> None: ...

class Stage(_message.Message):
    __slots__ = ("name", "description", "agent", "action", "params", "inputs", "input_from", "input_param", "parallel", "max_concurrency", "map", "reduce", "when", "on_failure", "retry", "budget", "task_timeout", "follow_next_actions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FROM_FIELD_NUMBER: _ClassVar[int]
    INPUT_PARAM_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    MAP_FIELD_NUMBER: _ClassVar[int]
    REDUCE_FIELD_NUMBER: _ClassVar[int]
    WHEN_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    TASK_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_NEXT_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    agent: str
    action: str
    params: _struct_pb2.Struct
    inputs: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Value]
    input_from: str
    input_param: str
    parallel: bool
    max_concurrency: int
    map: _containers.RepeatedCompositeFieldContainer[StageAction]
    reduce: ReduceSpec
    when: str
    on_failure: FailurePolicy
    retry: RetryPolicy
    budget: _common_pb2.Budget
    task_timeout: _duration_pb2.Duration
    follow_next_actions: FollowNextActions
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., agent: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., inputs: _Optional[_Iterable[_Union[_struct_pb2.Value, _Mapping]]] = ..., input_from: _Optional[str] = ..., input_param: _Optional[str] = ..., parallel: _Optional[bool] = ..., max_concurrency: _Optional[int] = ..., map: _Optional[_Iterable[_Union[StageAction, _Mapping]]] = ..., reduce: _Optional[_Union[ReduceSpec, _Mapping]] = ..., when: _Optional[str] = ..., on_failure: _Optional[_Union[FailurePolicy, str]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., budget: _Optional[_Union[_common_pb2.Budget, _Mapping]] = ..., task_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., follow_next_actions: _Optional[_Union[FollowNextActions, _Mapping]] = ...) -> None: ...

class WorkflowSpec(_message.Message):
    __slots__ = ("name", "description", "stages", "budget", "default_retry", "max_concurrency")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_RETRY_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    stages: _containers.RepeatedCompositeFieldContainer[Stage]
    budget: _common_pb2.Budget
    default_retry: RetryPolicy
    max_concurrency: int
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[Stage, _Mapping]]] = ..., budget: _Optional[_Union[_common_pb2.Budget, _Mapping]] = ..., default_retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., max_concurrency: _Optional[int] = ...) -> None: ...

class BudgetUsage(_message.Message):
    __slots__ = ("cost", "elapsed", "tasks")
    COST_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    cost: float
    elapsed: _duration_pb2.Duration
    tasks: int
    def __init__(self, cost: _Optional[float] = ..., elapsed: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., tasks: _Optional[int] = ...) -> None: ...

class TaskCounts(_message.Message):
    __slots__ = ("total", "pending", "running", "succeeded", "failed", "cancelled")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    total: int
    pending: int
    running: int
    succeeded: int
    failed: int
    cancelled: int
    def __init__(self, total: _Optional[int] = ..., pending: _Optional[int] = ..., running: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed: _Optional[int] = ..., cancelled: _Optional[int] = ...) -> None: ...

class RunStage(_message.Message):
    __slots__ = ("name", "state", "tasks", "usage", "started_at", "ended_at", "error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: StageState
    tasks: TaskCounts
    usage: BudgetUsage
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    error: _agent_io_pb2.TaskError
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[StageState, str]] = ..., tasks: _Optional[_Union[TaskCounts, _Mapping]] = ..., usage: _Optional[_Union[BudgetUsage, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[_Union[_agent_io_pb2.TaskError, _Mapping]] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("id", "name", "state", "spec", "spec_text", "stages", "tasks", "usage", "result", "error", "creator", "request_id", "created_at", "started_at", "ended_at", "last_sequence", "resume_count")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SPEC_TEXT_FIELD_NUMBER: _ClassVar[int]
    STAGES_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATOR_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RESUME_COUNT_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    state: RunState
    spec: WorkflowSpec
    spec_text: str
    stages: _containers.RepeatedCompositeFieldContainer[RunStage]
    tasks: TaskCounts
    usage: BudgetUsage
    result: _struct_pb2.Value
    error: _agent_io_pb2.TaskError
    creator: str
    request_id: str
    created_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    last_sequence: int
    resume_count: int
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., state: _Optional[_Union[RunState, str]] = ..., spec: _Optional[_Union[WorkflowSpec, _Mapping]] = ..., spec_text: _Optional[str] = ..., stages: _Optional[_Iterable[_Union[RunStage, _Mapping]]] = ..., tasks: _Optional[_Union[TaskCounts, _Mapping]] = ..., usage: _Optional[_Union[BudgetUsage, _Mapping]] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., error: _Optional[_Union[_agent_io_pb2.TaskError, _Mapping]] = ..., creator: _Optional[str] = ..., request_id: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_sequence: _Optional[int] = ..., resume_count: _Optional[int] = ...) -> None: ...

class RunTask(_message.Message):
    __slots__ = ("task_id", "stage", "input_index", "action_index", "agent", "action", "params", "state", "attempts", "output", "proposed_by", "started_at", "ended_at")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    INPUT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACTION_INDEX_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_BY_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    ENDED_AT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    stage: str
    input_index: int
    action_index: int
    agent: str
    action: str
    params: _struct_pb2.Struct
    state: RunTaskState
    attempts: int
    output: _agent_io_pb2.AgentOutput
    proposed_by: str
    started_at: _timestamp_pb2.Timestamp
    ended_at: _timestamp_pb2.Timestamp
    def __init__(self, task_id: _Optional[str] = ..., stage: _Optional[str] = ..., input_index: _Optional[int] = ..., action_index: _Optional[int] = ..., agent: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., state: _Optional[_Union[RunTaskState, str]] = ..., attempts: _Optional[int] = ..., output: _Optional[_Union[_agent_io_pb2.AgentOutput, _Mapping]] = ..., proposed_by: _Optional[str] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., ended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateRunRequest(_message.Message):
    __slots__ = ("spec", "spec_text", "request_id", "validate_only", "notify")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SPEC_TEXT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    NOTIFY_FIELD_NUMBER: _ClassVar[int]
    spec: WorkflowSpec
    spec_text: str
    request_id: str
    validate_only: bool
    notify: _common_pb2.Notify
    def __init__(self, spec: _Optional[_Union[WorkflowSpec, _Mapping]] = ..., spec_text: _Optional[str] = ..., request_id: _Optional[str] = ..., validate_only: _Optional[bool] = ..., notify: _Optional[_Union[_common_pb2.Notify, _Mapping]] = ...) -> None: ...

class CreateRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "states", "name")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[RunState]
    name: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., states: _Optional[_Iterable[_Union[RunState, str]]] = ..., name: _Optional[str] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListRunTasksRequest(_message.Message):
    __slots__ = ("run_id", "page_size", "page_token", "stage", "state")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    page_size: int
    page_token: str
    stage: str
    state: RunTaskState
    def __init__(self, run_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., stage: _Optional[str] = ..., state: _Optional[_Union[RunTaskState, str]] = ...) -> None: ...

class ListRunTasksResponse(_message.Message):
    __slots__ = ("tasks", "next_page_token")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[RunTask]
    next_page_token: str
    def __init__(self, tasks: _Optional[_Iterable[_Union[RunTask, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id", "reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reason: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class WaitRunRequest(_message.Message):
    __slots__ = ("run_id", "timeout")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    timeout: _duration_pb2.Duration
    def __init__(self, run_id: _Optional[str] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WaitRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class StreamRunEventsRequest(_message.Message):
    __slots__ = ("run_id", "after_sequence", "exclude_task_details")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_TASK_DETAILS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_sequence: int
    exclude_task_details: bool
    def __init__(self, run_id: _Optional[str] = ..., after_sequence: _Optional[int] = ..., exclude_task_details: _Optional[bool] = ...) -> None: ...

class RunStarted(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunResumed(_message.Message):
    __slots__ = ("tasks_rerun", "tasks_failed")
    TASKS_RERUN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    tasks_rerun: int
    tasks_failed: int
    def __init__(self, tasks_rerun: _Optional[int] = ..., tasks_failed: _Optional[int] = ...) -> None: ...

class RunCompleted(_message.Message):
    __slots__ = ("state", "error", "usage", "tasks")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    state: RunState
    error: _agent_io_pb2.TaskError
    usage: BudgetUsage
    tasks: TaskCounts
    def __init__(self, state: _Optional[_Union[RunState, str]] = ..., error: _Optional[_Union[_agent_io_pb2.TaskError, _Mapping]] = ..., usage: _Optional[_Union[BudgetUsage, _Mapping]] = ..., tasks: _Optional[_Union[TaskCounts, _Mapping]] = ...) -> None: ...

class StageStarted(_message.Message):
    __slots__ = ("stage", "tasks")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    tasks: int
    def __init__(self, stage: _Optional[str] = ..., tasks: _Optional[int] = ...) -> None: ...

class StageProgress(_message.Message):
    __slots__ = ("stage", "tasks", "usage")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    stage: str
    tasks: TaskCounts
    usage: BudgetUsage
    def __init__(self, stage: _Optional[str] = ..., tasks: _Optional[_Union[TaskCounts, _Mapping]] = ..., usage: _Optional[_Union[BudgetUsage, _Mapping]] = ...) -> None: ...

class StageCompleted(_message.Message):
    __slots__ = ("stage", "state", "tasks", "usage", "error")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    stage: str
    state: StageState
    tasks: TaskCounts
    usage: BudgetUsage
    error: _agent_io_pb2.TaskError
    def __init__(self, stage: _Optional[str] = ..., state: _Optional[_Union[StageState, str]] = ..., tasks: _Optional[_Union[TaskCounts, _Mapping]] = ..., usage: _Optional[_Union[BudgetUsage, _Mapping]] = ..., error: _Optional[_Union[_agent_io_pb2.TaskError, _Mapping]] = ...) -> None: ...

class RunTaskStarted(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: RunTask
    def __init__(self, task: _Optional[_Union[RunTask, _Mapping]] = ...) -> None: ...

class RunTaskProgress(_message.Message):
    __slots__ = ("task_id", "stage", "progress", "log")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    stage: str
    progress: _agent_io_pb2.TaskProgress
    log: _agent_io_pb2.TaskLog
    def __init__(self, task_id: _Optional[str] = ..., stage: _Optional[str] = ..., progress: _Optional[_Union[_agent_io_pb2.TaskProgress, _Mapping]] = ..., log: _Optional[_Union[_agent_io_pb2.TaskLog, _Mapping]] = ...) -> None: ...

class RunTaskCompleted(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: RunTask
    def __init__(self, task: _Optional[_Union[RunTask, _Mapping]] = ...) -> None: ...

class StreamRunEventsResponse(_message.Message):
    __slots__ = ("sequence", "run_id", "time", "run_started", "run_resumed", "run_completed", "stage_started", "stage_progress", "stage_completed", "task_started", "task_progress", "task_completed")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    RUN_STARTED_FIELD_NUMBER: _ClassVar[int]
    RUN_RESUMED_FIELD_NUMBER: _ClassVar[int]
    RUN_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    STAGE_STARTED_FIELD_NUMBER: _ClassVar[int]
    STAGE_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    STAGE_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    TASK_STARTED_FIELD_NUMBER: _ClassVar[int]
    TASK_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TASK_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    run_id: str
    time: _timestamp_pb2.Timestamp
    run_started: RunStarted
    run_resumed: RunResumed
    run_completed: RunCompleted
    stage_started: StageStarted
    stage_progress: StageProgress
    stage_completed: StageCompleted
    task_started: RunTaskStarted
    task_progress: RunTaskProgress
    task_completed: RunTaskCompleted
    def __init__(self, sequence: _Optional[int] = ..., run_id: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_started: _Optional[_Union[RunStarted, _Mapping]] = ..., run_resumed: _Optional[_Union[RunResumed, _Mapping]] = ..., run_completed: _Optional[_Union[RunCompleted, _Mapping]] = ..., stage_started: _Optional[_Union[StageStarted, _Mapping]] = ..., stage_progress: _Optional[_Union[StageProgress, _Mapping]] = ..., stage_completed: _Optional[_Union[StageCompleted, _Mapping]] = ..., task_started: _Optional[_Union[RunTaskStarted, _Mapping]] = ..., task_progress: _Optional[_Union[RunTaskProgress, _Mapping]] = ..., task_completed: _Optional[_Union[RunTaskCompleted, _Mapping]] = ...) -> None: ...

class ResumeRunRequest(_message.Message):
    __slots__ = ("run_id", "include_non_idempotent", "request_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_NON_IDEMPOTENT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    include_non_idempotent: bool
    request_id: str
    def __init__(self, run_id: _Optional[str] = ..., include_non_idempotent: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResumeRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class GetRunReportRequest(_message.Message):
    __slots__ = ("run_id", "format")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    format: ReportFormat
    def __init__(self, run_id: _Optional[str] = ..., format: _Optional[_Union[ReportFormat, str]] = ...) -> None: ...

class GetRunReportResponse(_message.Message):
    __slots__ = ("content", "content_type", "format", "run_state")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    RUN_STATE_FIELD_NUMBER: _ClassVar[int]
    content: str
    content_type: str
    format: ReportFormat
    run_state: RunState
    def __init__(self, content: _Optional[str] = ..., content_type: _Optional[str] = ..., format: _Optional[_Union[ReportFormat, str]] = ..., run_state: _Optional[_Union[RunState, str]] = ...) -> None: ...
