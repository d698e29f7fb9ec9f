"""Protobuf <-> domain conversions shared by the servicers."""

from __future__ import annotations

import math
import time
from typing import Any

import orjson
from google.protobuf import duration_pb2, timestamp_pb2

from ether.v1 import agent_io_pb2, common_pb2
from ether_host.agents import Budget, TaskInput, TaskResult
from ether_host.errors import FieldViolation, InvalidArgument
from ether_host.notifications import Notify
from ether_host.reasons import Reason
from ether_host.supervisor import ManagedAgent, State
from ether_host.transport.struct_values import (
    ValueTooDeep,
    fill_struct_or_note,
    fill_value,
)

# Struct <-> Python values live in struct_values; the servicers import them from here.
from ether_host.transport.struct_values import dict_to_struct as dict_to_struct
from ether_host.transport.struct_values import integral as integral
from ether_host.transport.struct_values import struct_to_dict as struct_to_dict
from ether_host.transport.struct_values import to_value as to_value
from ether_host.transport.struct_values import value_to_python as value_to_python

RPC_DEADLINE_MARGIN = 0.05  # seconds the host's deadline answer needs to reach the caller
NANOS = 1_000_000_000


def seconds(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def duration(value: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromNanoseconds(int(value * 1e9))
    return message


def timestamp(epoch: float) -> timestamp_pb2.Timestamp:
    message = timestamp_pb2.Timestamp()
    message.FromNanoseconds(int(epoch * 1e9))
    return message


def budget_from(message: common_pb2.Budget) -> Budget:
    return Budget(
        max_cost=message.max_cost if message.HasField("max_cost") else None,
        max_time=seconds(message.max_time) if message.HasField("max_time") else None,
        max_iterations=message.max_iterations if message.HasField("max_iterations") else None,
        max_tasks=message.max_tasks if message.HasField("max_tasks") else None,
    )


def notify(message: common_pb2.Notify) -> Notify:
    """Where a request asks for its final output to go (empty: nowhere)."""
    return Notify(webhook_url=message.webhook_url, reply_topic=message.reply_topic)


def task_input(message: agent_io_pb2.AgentInput, rpc_deadline: float | None) -> TaskInput:
    """An AgentInput as a TaskInput; ``rpc_deadline`` is time left on the call, in seconds."""
    if message.output_encoding not in _ENCODINGS:
        raise InvalidArgument(
            f"input.output_encoding {message.output_encoding} is not a DataEncoding; use "
            "DATA_ENCODING_STRUCT (the default) or DATA_ENCODING_JSON",
            reason=Reason.INVALID_OUTPUT_ENCODING,
            violations=[FieldViolation("input.output_encoding", "STRUCT or JSON")],
        )
    if not message.HasField("context"):
        # Most inputs carry no context: its five reads (a budget of four) cost more than the
        # rest of the conversion, on Pipe's hot path (bench/RESULTS.md, "Batching").
        return TaskInput(
            agent=message.agent,
            action=message.action,
            params=_params(message),
            task_id=message.task_id,
            idempotent=message.idempotent if message.HasField("idempotent") else None,
            force_refresh=message.force_refresh,
            deadline=None if rpc_deadline is None else time.monotonic() + rpc_deadline,
        )
    context = message.context
    return TaskInput(
        agent=message.agent,
        action=message.action,
        params=_params(message),
        task_id=message.task_id,
        budget=budget_from(context.budget),
        parent_task=context.parent_task,
        workflow=context.workflow,
        session_id=context.session_id,
        permissions=list(context.permissions),
        idempotent=message.idempotent if message.HasField("idempotent") else None,
        force_refresh=message.force_refresh,
        deadline=None if rpc_deadline is None else time.monotonic() + rpc_deadline,
    )


def _params(message: agent_io_pb2.AgentInput) -> dict[str, Any]:
    if not message.params_json:
        return struct_to_dict(message.params)
    if message.HasField("params") and message.params.fields:
        raise InvalidArgument(
            "set input.params or input.params_json, not both",
            reason=Reason.PARAMS_TWICE,
            violations=[FieldViolation("input.params_json", "set only when params is empty")],
        )
    try:
        params = orjson.loads(message.params_json)
    except orjson.JSONDecodeError as error:
        raise InvalidArgument(
            f"input.params_json is not valid JSON: {error}",
            reason=Reason.INVALID_PARAMS_JSON,
            violations=[FieldViolation("input.params_json", f"invalid JSON: {error}")],
        ) from None
    if not isinstance(params, dict):
        raise InvalidArgument(
            f"input.params_json must be a JSON object, not {type(params).__name__}",
            reason=Reason.INVALID_PARAMS_JSON,
            violations=[FieldViolation("input.params_json", "must be a JSON object")],
        )
    return params


_ENCODINGS = frozenset(agent_io_pb2.DataEncoding.values())


def wants_json(message: agent_io_pb2.AgentInput) -> bool:
    """True when the caller asked for the result as JSON bytes (AgentOutput.data_json)."""
    return message.output_encoding == agent_io_pb2.DATA_ENCODING_JSON


def _too_deep(output: agent_io_pb2.AgentOutput, result: TaskResult, deep: ValueTooDeep) -> None:
    """The agent's data cannot travel as a Value: the output says so (ERROR, code
    ``data_too_deep``) instead of a message no client could decode; as JSON it can."""
    output.ClearField("data")
    output.status = agent_io_pb2.TASK_STATUS_ERROR
    own = result.error
    output.error.code = "data_too_deep"
    output.error.message = (
        f"the data of task {result.task_id} cannot be answered as a Value: {deep}; ask for it "
        "as JSON (AgentInput.output_encoding DATA_ENCODING_JSON, answered in data_json)"
        + (f" (the agent's own error: {own.code}: {own.message})" if own is not None else "")
    )


_STATUS = {
    "SUCCESS": agent_io_pb2.TASK_STATUS_SUCCESS,
    "ERROR": agent_io_pb2.TASK_STATUS_ERROR,
    "PARTIAL": agent_io_pb2.TASK_STATUS_PARTIAL,
}


def fill_agent_output(
    output: agent_io_pb2.AgentOutput, result: TaskResult, as_json: bool = False
) -> None:
    """Fill an empty AgentOutput in place, such as a response's ``output`` field (passing a
    built message into another copies it, field by field); ``as_json`` puts the result in
    data_json instead of data."""
    meta = result.metadata
    output.task_id = result.task_id
    output.status = _STATUS[result.status]
    output.agent = result.agent
    output.action = result.action
    metadata = output.metadata
    # seconds and nanos set directly: FromNanoseconds is Python code in protobuf's
    # well_known_types, a few µs per call (both values are never negative here).
    metadata.duration.seconds, metadata.duration.nanos = divmod(int(meta.duration * 1e9), NANOS)
    started = metadata.started_at
    started.seconds, started.nanos = divmod(int(meta.started_at * 1e9), NANOS)
    # A proto3 scalar left at its default reads the same as one set to it: the usual zeros
    # are not written (each write is a call into upb, on every output).
    if meta.cost:
        metadata.cost = meta.cost
    if meta.model:
        metadata.model = meta.model
    metadata.host = meta.host
    metadata.pid = meta.pid
    metadata.attempt = meta.attempt
    if meta.cached:
        metadata.cached = True
    if meta.extra:  # the agent's: one too deep is a note in its place, as data cannot be
        fill_struct_or_note(metadata.extra, meta.extra, "the task's metadata.extra")
    if result.data is not None:
        if as_json:
            output.data_json = orjson.dumps(result.data, option=orjson.OPT_NON_STR_KEYS)
        else:
            try:
                fill_value(output.data, result.data)
            except ValueTooDeep as deep:
                _too_deep(output, result, deep)
                return
    if result.error is not None:
        error = output.error
        error.code = result.error.code
        error.message = result.error.message
        error.retryable = result.error.retryable
        if result.error.details:
            fill_struct_or_note(error.details, result.error.details, "the task's error details")
    for index, proposal in enumerate(result.next_actions):
        added = output.next_actions.add(
            agent=str(proposal.get("agent") or ""),
            action=str(proposal.get("action") or ""),
            reason=str(proposal.get("reason") or ""),
        )
        what = f"the params of the task's next action {index}"
        fill_struct_or_note(added.params, proposal.get("params") or {}, what)


def error_output(
    task: agent_io_pb2.AgentInput, code: str, message: str
) -> agent_io_pb2.AgentOutput:
    """An ERROR output for an input the host could not run (Pipe answers in-stream)."""
    return agent_io_pb2.AgentOutput(
        task_id=task.task_id,
        status=agent_io_pb2.TASK_STATUS_ERROR,
        agent=task.agent,
        action=task.action,
        error=agent_io_pb2.TaskError(code=code, message=message),
    )


LANGUAGES = {
    "python": common_pb2.LANGUAGE_PYTHON,
    "go": common_pb2.LANGUAGE_GO,
    "typescript": common_pb2.LANGUAGE_TYPESCRIPT,
}
LANGUAGE_NAMES = {v: k for k, v in LANGUAGES.items()}


def language(name: str) -> common_pb2.Language:
    """An agent's language; UNSPECIFIED for an MCP server whose folder does not tell one."""
    return LANGUAGES.get(name, common_pb2.LANGUAGE_UNSPECIFIED)


KINDS = {
    "general": agent_io_pb2.AGENT_TYPE_GENERAL,
    "io_gateway": agent_io_pb2.AGENT_TYPE_IO_GATEWAY,
}
KIND_NAMES = {v: k for k, v in KINDS.items()}


_STATE_NUMBERS = {s: int(agent_io_pb2.AgentState.Value(f"AGENT_STATE_{s.value}")) for s in State}


def agent_state(state: State) -> int:
    return _STATE_NUMBERS[state]


def action_specs(agent: ManagedAgent) -> list[agent_io_pb2.ActionSpec]:
    """The agent's actions as ActionSpec messages."""
    return [
        agent_io_pb2.ActionSpec(
            name=a.name,
            description=a.description,
            params_schema=dict_to_struct(a.params_schema),
            idempotent=a.idempotent,
            result_schema=dict_to_struct(a.result_schema) if a.result_schema else None,
            unusable=a.unusable,
            cache_ttl=duration(a.cache_ttl) if a.cache_ttl else None,
        )
        for a in agent.actions
    ]


def rpc_time_left(time_remaining: float | None) -> float | None:
    """grpc's time_remaining() as seconds, None when the call has no deadline."""
    if time_remaining is None or math.isinf(time_remaining) or time_remaining > 10**8:
        return None
    # Leave room so the host's own deadline handling (cancel frame, DEADLINE_EXCEEDED naming
    # the task) runs before the caller's timer ends the call.
    return max(0.0, time_remaining - _timeout_grain(time_remaining) - RPC_DEADLINE_MARGIN)


def _timeout_grain(seconds: float) -> float:
    """How much later than the caller's the deadline grpc hands us can be: C-core clients
    (Python, C++, ...) send their timeout rounded up, to 10 ms below 10 s, to 100 ms below
    100 s and to whole seconds above (grpc's timeout_encoding.cc)."""
    if seconds < 1:
        return 0.001
    if seconds < 10:
        return 0.01
    if seconds < 100:
        return 0.1
    return 1.0
