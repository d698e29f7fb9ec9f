"""One rule for bad requests, in every service: a missing required field, a value out of its
range, an enum number the enum lacks, an invalid Duration or Timestamp, bytes that are not
protobuf at all, a Struct nested past protobuf's depth limit -- each answers INVALID_ARGUMENT
with a message a person can act on and google.rpc details (ErrorInfo, and a BadRequest
violation naming each bad field), never INTERNAL or UNKNOWN.

The required fields and ranges are read from the protos' own annotations
(ether/v1/rules.proto), so a new RPC or field is covered by declaring it there; the RPCs whose
empty request is valid are listed here, so a forgotten annotation fails this test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message

from ether.v1 import (
    agent_io_pb2,
    gateway_pb2,
    rules_pb2,
    supervisor_pb2,
    terminal_pb2,
    workflow_pb2,
)
from tests.support.calls import agent_input, details
from tests.support.host import HostProcess

from ._support import service_descriptors

METHODS = [
    (service.full_name, method)
    for service in service_descriptors().values()
    for method in service.methods
]
# The RPCs an empty request is valid for: lists, watches and the calls that open something
# with every setting defaulted (Attach and Converse check their first message themselves).
EMPTY_IS_VALID = {
    "ListAgents",
    "ListProcesses",
    "WatchEvents",
    "CreateTerminal",
    "ListTerminals",
    "WatchTerminals",
    "Attach",
    "ListRuns",
    "OpenSession",
    "ListSessions",
    "Converse",
    "ListAudit",
    "WatchAudit",
}
DEADLINE = 60.0  # an answer never comes this late; a stream that got no error would wait
NOT_PROTOBUF = b"\x0a\xff"  # field 1, length-delimited, with a length that never ends


def _field_rules(field: FieldDescriptor) -> rules_pb2.FieldRules:
    rules: rules_pb2.FieldRules = field.GetOptions().Extensions[rules_pb2.field]  # type: ignore[index]
    return rules


def _required_names(descriptor: Descriptor) -> set[str]:
    """The fields (and oneofs) of a request that must be set, by name."""
    names = {f.name for f in descriptor.fields if _field_rules(f).required}
    for oneof in descriptor.oneofs:
        rules = oneof.GetOptions().Extensions[rules_pb2.oneof]  # type: ignore[index]
        if rules.required:
            names.add(oneof.name)
    return names


def _paths(
    descriptor: Descriptor, prefix: tuple[FieldDescriptor, ...] = ()
) -> Iterator[tuple[FieldDescriptor, ...]]:
    """Every singular field reachable from a request through message fields (a repeated one
    stands for its first element)."""
    for field in descriptor.fields:
        path = (*prefix, field)
        kind = field.message_type
        if kind is not None and kind.GetOptions().map_entry:
            continue
        if not field.is_repeated:
            yield path
        nested = kind is not None and not kind.full_name.startswith("google.protobuf.")
        # A type that nests itself is walked once.
        if nested and kind not in [f.containing_type for f in prefix]:
            yield from _paths(kind, path)


def _with(request: Message, path: tuple[FieldDescriptor, ...], value: Any) -> Message:
    """``request`` with the field at ``path`` set to ``value`` (a message is copied in)."""
    target: Any = request
    for field in path[:-1]:
        target = getattr(target, field.name)
        if field.is_repeated:
            target = target[0] if len(target) else target.add()
    last = path[-1].name
    if isinstance(value, Message):
        getattr(target, last).CopyFrom(value)
    else:
        setattr(target, last, value)
    return request


def _dotted(path: tuple[FieldDescriptor, ...]) -> str:
    return ".".join(f.name + ("[0]" if f.is_repeated else "") for f in path)


def _call(channel: grpc.Channel, service: str, method: MethodDescriptor, request: Any) -> Any:
    """Send one request (a message, or bytes as they are) to ``method``; its response(s)."""
    raw = isinstance(request, bytes)
    request_type = message_factory.GetMessageClass(method.input_type)
    response_type = message_factory.GetMessageClass(method.output_type)
    kinds: dict[tuple[bool, bool], Callable[..., Any]] = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }
    stub = kinds[(method.client_streaming, method.server_streaming)](
        f"/{service}/{method.name}",
        request_serializer=None if raw else request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )
    argument = iter([request]) if method.client_streaming else request
    result = stub(argument, timeout=DEADLINE)
    return list(result) if method.server_streaming else result


def _refused(
    channel: grpc.Channel, service: str, method: MethodDescriptor, request: Any
) -> tuple[grpc.RpcError, dict[str, str]]:
    """Call ``method``, which must answer INVALID_ARGUMENT with an ErrorInfo; the error and
    its BadRequest violations (field -> description)."""
    with pytest.raises(grpc.RpcError) as caught:
        _call(channel, service, method, request)
    error = caught.value
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (
        f"{method.name}: {error.code().name}: {error.details()}"
    )
    found = details(error)
    assert found["ErrorInfo"].domain == "ether", method.name
    violations = {
        v.field: v.description for v in found.get("BadRequest", _NoViolations).field_violations
    }
    return error, violations


class _NoViolations:
    field_violations: tuple[Any, ...] = ()


def _no_crash_logged(host: HostProcess) -> None:
    crashes = [r for r in host.records if r.get("event") == "rpc crashed"]
    assert not crashes, [(r.get("method"), r.get("exception")) for r in crashes]


def test_an_empty_request_names_every_missing_required_field(host: HostProcess) -> None:
    """Every RPC of the five services, called with an empty request, either needs nothing or
    answers INVALID_ARGUMENT with one BadRequest violation per required field, named as in the
    proto -- GetAgent {} no longer answers NOT_FOUND "no agent named ''"."""
    needs_nothing = set()
    for service, method in METHODS:
        required = _required_names(method.input_type)
        if not required:
            needs_nothing.add(method.name)
            continue
        request = message_factory.GetMessageClass(method.input_type)()
        error, violations = _refused(host.channel, service, method, request)
        assert set(violations) == required, (method.name, violations)
        assert all(description.startswith("is required") for description in violations.values())
        assert details(error)["ErrorInfo"].reason == "MISSING_FIELD"
        for name in required:
            assert f"{name} is required" in (error.details() or ""), (method.name, error.details())
    assert needs_nothing == EMPTY_IS_VALID
    _no_crash_logged(host)


def _ranged() -> Iterator[tuple[str, MethodDescriptor, tuple[FieldDescriptor, ...]]]:
    for service, method in METHODS:
        for path in _paths(method.input_type):
            rules = _field_rules(path[-1])
            if rules.HasField("min") or rules.HasField("max"):
                yield service, method, path


def test_every_documented_range_is_enforced(host: HostProcess) -> None:
    """Each integer field with a documented range, in any request (Pipe's max_in_flight,
    Resize's rows, ScaleAgent's replicas, every page_size...), refuses a value below it with
    a violation naming the field; above it, a field documented to clamp (page_size per
    AIP-158, terminal sizes) is clamped, any other is refused the same way."""
    ranged = list(_ranged())
    assert {m.name for _, m, p in ranged if p[-1].name == "max_in_flight"} == {"Pipe"}
    for service, method, path in ranged:
        rules = _field_rules(path[-1])
        make = message_factory.GetMessageClass(method.input_type)
        probes = []
        if rules.HasField("min"):
            # Below the minimum; for a required field, below zero too (0 is "missing" there).
            probes.append(min(rules.min - 1, -1) if rules.required else rules.min - 1)
        if rules.HasField("max") and not rules.clamp:
            probes.append(rules.max + 1)
        for value in probes:
            _, violations = _refused(host.channel, service, method, _with(make(), path, value))
            assert _dotted(path) in violations, (method.name, value, violations)
            assert str(value) in violations[_dotted(path)]
        if path[-1].name == "page_size" and not _required_names(method.input_type):
            # A list with nothing else to set: a page size above the maximum just clamps.
            _call(host.channel, service, method, _with(make(), path, rules.max + 1))
    _no_crash_logged(host)


def test_undefined_enum_numbers_are_invalid_arguments(host: HostProcess) -> None:
    """An enum number the enum does not define (proto3 lets one through the wire) is refused
    with a violation naming the field and the values that exist, where ListRuns, ListRunTasks
    and WriteInput used to crash (INTERNAL)."""
    services = service_descriptors()
    cases = [
        ("WorkflowService", "ListRuns", workflow_pb2.ListRunsRequest(states=[99]), "states[0]"),
        (
            "WorkflowService",
            "ListRunTasks",
            workflow_pb2.ListRunTasksRequest(run_id="r", state=99),  # type: ignore[arg-type]
            "state",
        ),
        (
            "TerminalService",
            "WriteInput",
            terminal_pb2.WriteInputRequest(
                terminal_id="t",
                input=terminal_pb2.TerminalInput(key=99),  # type: ignore[arg-type]
            ),
            "input.key",
        ),
    ]
    for service, name, request, field in cases:
        descriptor = services[f"ether.v1.{service}"].methods_by_name[name]
        error, violations = _refused(host.channel, f"ether.v1.{service}", descriptor, request)
        assert "99 is not a" in violations[field], violations
        assert "use one of" in (error.details() or "")
    _no_crash_logged(host)


def test_an_invalid_duration_is_refused_wherever_one_is_accepted(host: HostProcess) -> None:
    """Every Duration field of every request (StopAgent's grace, WaitRun's timeout, a
    terminal's idle_timeout, a budget's max_time...) refuses {seconds: -1, nanos: 5}, whose
    signs disagree, naming the field."""
    invalid = message_factory.GetMessageClass(
        supervisor_pb2.StopAgentRequest.DESCRIPTOR.fields_by_name["grace"].message_type
    )(seconds=-1, nanos=5)
    seen = 0
    for service, method in METHODS:
        make = message_factory.GetMessageClass(method.input_type)
        for path in _paths(method.input_type):
            kind = path[-1].message_type
            if kind is None or kind.full_name != "google.protobuf.Duration":
                continue
            seen += 1
            _, violations = _refused(host.channel, service, method, _with(make(), path, invalid))
            assert "not a valid Duration" in violations.get(_dotted(path), ""), (
                method.name,
                violations,
            )
    assert seen >= 10
    _no_crash_logged(host)


def test_an_invalid_timestamp_is_refused(host: HostProcess) -> None:
    """ListAudit's start_time with negative nanos is refused naming the field."""
    services = service_descriptors()
    method = services["ether.v1.GatewayService"].methods_by_name["ListAudit"]
    request = gateway_pb2.ListAuditRequest()
    request.start_time.nanos = -1
    _, violations = _refused(host.channel, "ether.v1.GatewayService", method, request)
    assert "not a valid Timestamp" in violations["start_time"]
    _no_crash_logged(host)


def test_a_pipe_input_without_its_agent_ends_the_stream(host: HostProcess) -> None:
    """On Pipe an input that names no agent is a malformed request: the stream ends with
    INVALID_ARGUMENT naming input.agent, while an unknown agent is still answered in-stream."""
    unknown = agent_io_pb2.PipeRequest(input=agent_input("no-such-agent", "run"))
    outputs = list(host.agents.Pipe(iter([unknown]), timeout=DEADLINE))
    assert [o.output.status for o in outputs] == [agent_io_pb2.TASK_STATUS_ERROR]
    with pytest.raises(grpc.RpcError) as caught:
        list(
            host.agents.Pipe(
                iter([agent_io_pb2.PipeRequest(input=agent_input(""))]), timeout=DEADLINE
            )
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in details(caught.value)["BadRequest"].field_violations] == [
        "input.agent"
    ]
    _no_crash_logged(host)


def test_bytes_that_are_not_protobuf_are_invalid_arguments(host: HostProcess) -> None:
    """Corrupt request bytes, to any method of any service, unary or streamed (Pipe, Attach,
    Converse), answer INVALID_ARGUMENT naming the message type -- not UNKNOWN with grpc's
    "Unexpected <class 'DecodeError'>", nor INTERNAL."""
    for service, method in METHODS:
        error, _ = _refused(host.channel, service, method, NOT_PROTOBUF)
        assert method.input_type.full_name in (error.details() or ""), error.details()
        assert "not valid protobuf" in (error.details() or "")
        assert details(error)["ErrorInfo"].reason == "MALFORMED_REQUEST"
    _no_crash_logged(host)


def _length_delimited(number: int, payload: bytes) -> bytes:
    def varint(value: int) -> bytes:
        out = b""
        while value > 0x7F:
            out += bytes([value & 0x7F | 0x80])
            value >>= 7
        return out + bytes([value])

    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _nested_struct(levels: int) -> bytes:
    """A google.protobuf.Struct {"a": {"a": ...}} ``levels`` objects deep, encoded by hand
    (the Python protobuf runtime refuses to build one this deep)."""
    struct = b""
    for _ in range(levels):
        value = _length_delimited(5, struct)  # Value.struct_value
        entry = _length_delimited(1, b"a") + _length_delimited(2, value)
        struct = _length_delimited(1, entry)  # Struct.fields, one map entry
    return struct


def test_a_struct_nested_too_deep_is_an_invalid_argument(host: HostProcess) -> None:
    """A JSON value nested 40 levels deep in any Struct a request accepts (OpenSession's
    context, UpdateContext, CreateRun, Execute's params, ...) answers INVALID_ARGUMENT saying
    how deep is too deep, where it used to answer UNKNOWN."""
    deep = _nested_struct(40)
    reached = set()
    for service, method in METHODS:
        for path in _paths(method.input_type):
            kind = path[-1].message_type
            if kind is None or kind.full_name != "google.protobuf.Struct":
                continue
            payload = deep
            for field in reversed(path):
                payload = _length_delimited(field.number, payload)
            error, _ = _refused(host.channel, service, method, payload)
            assert "more than 100 deep" in (error.details() or ""), error.details()
            reached.add(method.name)
            break
    assert {"OpenSession", "UpdateContext", "CreateRun", "Execute", "ExecuteStream"} <= reached
    _no_crash_logged(host)


def test_a_path_too_long_for_the_file_system_is_an_invalid_argument(host: HostProcess) -> None:
    """DeployAgent with a 300-character folder name (ENAMETOOLONG) names spec.path."""
    request = supervisor_pb2.DeployAgentRequest(
        spec=supervisor_pb2.AgentSpec(path="/tmp/" + "a" * 300)
    )
    with pytest.raises(grpc.RpcError) as caught:
        host.supervisor.DeployAgent(request, timeout=DEADLINE)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT, caught.value.details()
    violations = details(caught.value)["BadRequest"].field_violations
    assert [v.field for v in violations] == ["spec.path"]
    assert "too long" in violations[0].description
    _no_crash_logged(host)
