"""One rule for bad requests, in every service: a missing required field, a value out of its
range, an enum number the enum lacks, an invalid Duration or Timestamp, bytes that are not
protobuf at all, a Struct nested past protobuf's depth limit -- each answers INVALID_ARGUMENT
with a message a person can act on and google.rpc details (ErrorInfo, and a BadRequest
violation naming each bad field), never INTERNAL or UNKNOWN.

The required fields, ranges, counts and lengths are read from the protos' own annotations
(ether/v1/rules.proto), so a new RPC or field is covered by declaring it there; the RPCs whose
empty request is valid are listed here, so a forgotten annotation fails this test. Pipe answers
a bad input in its stream (an output with error code invalid_argument) and goes on."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import json_format, message_factory
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
from ether_host.transport import validation
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
    "GetHostInfo",
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
    "Pipe",  # its one required field, input, is answered in the stream
}
DEADLINE = 60.0  # an answer never comes this late; a stream that got no error would wait
NOT_PROTOBUF = b"\x0a\xff"  # field 1, length-delimited, with a length that never ends


def _field_rules(field: FieldDescriptor) -> rules_pb2.FieldRules:
    rules: rules_pb2.FieldRules = field.GetOptions().Extensions[rules_pb2.field]  # type: ignore[index]
    return rules


def _in_stream(method: MethodDescriptor, path: tuple[FieldDescriptor, ...]) -> bool:
    """Whether a problem at ``path`` is answered in the stream (a Pipe input) rather than
    ending the call."""
    answered = validation.ANSWERED_IN_STREAM.get(method.input_type.full_name, frozenset())
    return bool(path) and path[0].name in answered


def _required_names(descriptor: Descriptor) -> set[str]:
    """The fields (and oneofs) of a request that must be set before the method runs, by
    name (a Pipe input's are answered in the stream)."""
    answered = validation.ANSWERED_IN_STREAM.get(descriptor.full_name, frozenset())
    names = {
        f.name for f in descriptor.fields if _field_rules(f).required and f.name not in answered
    }
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


def _answered_in_stream(
    channel: grpc.Channel, service: str, method: MethodDescriptor, request: Message
) -> tuple[agent_io_pb2.TaskError, dict[str, str]]:
    """Send one input on ``method`` (Pipe: in ``input``, or as a batch of one in ``inputs``),
    which must answer it in the stream with error code invalid_argument and end OK; the error
    and its violations (field -> description)."""
    responses = _call(channel, service, method, request)
    outputs = [r.output for r in responses if r.HasField("output")]
    outputs += [o for r in responses for o in r.outputs]  # a batch is answered in ``outputs``
    assert len(outputs) == 1, responses
    error = outputs[0].error
    assert outputs[0].status == agent_io_pb2.TASK_STATUS_ERROR
    assert error.code == "invalid_argument", (error.code, error.message)
    found = json_format.MessageToDict(error.details)
    violations = {v["field"]: v["description"] for v in found.get("field_violations", [])}
    return error, violations


def _violations(
    channel: grpc.Channel,
    service: str,
    method: MethodDescriptor,
    path: tuple[FieldDescriptor, ...],
    request: Message,
) -> dict[str, str]:
    """The violations ``method`` names for ``request``, broken at ``path``: from its
    INVALID_ARGUMENT status, or from its in-stream answer for a Pipe input."""
    # An input that breaks the rules is answered in the stream; a batch over its size bound
    # concerns the whole message and ends the call.
    whole_batch = len(path) == 1 and path[0].is_repeated
    if _in_stream(method, path) and not whole_batch:
        return _answered_in_stream(channel, service, method, request)[1]
    return _refused(channel, service, method, request)[1]


def _no_crash_logged(host: HostProcess) -> None:
    crashes = [r for r in host.records if r.get("event") == "rpc crashed"]
    assert not crashes, [(r.get("method"), r.get("exception")) for r in crashes]


def test_an_empty_request_names_every_missing_required_field(host: HostProcess) -> None:
    """Every RPC of the five services, called with an empty request, either needs nothing or
    answers INVALID_ARGUMENT with one BadRequest violation per required field, named as in the
    proto -- GetAgent {} no longer answers NOT_FOUND "no agent named ''". Pipe answers an
    empty request in its stream: "input is required"."""
    needs_nothing = set()
    for service, method in METHODS:
        request = message_factory.GetMessageClass(method.input_type)()
        answered = {
            f.name
            for f in method.input_type.fields
            if _field_rules(f).required and _in_stream(method, (f,))
        }
        if answered:
            task_error, violations = _answered_in_stream(host.channel, service, method, request)
            assert set(violations) == answered, (method.name, violations)
            assert task_error.message == "input is required"
        required = _required_names(method.input_type)
        if not required:
            needs_nothing.add(method.name)
            continue
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
            request = _with(make(), path, value)
            violations = _violations(host.channel, service, method, path, request)
            assert _dotted(path) in violations, (method.name, value, violations)
            assert str(value) in violations[_dotted(path)]
        if path[-1].name == "page_size" and not _required_names(method.input_type):
            # A list with nothing else to set: a page size above the maximum just clamps.
            _call(host.channel, service, method, _with(make(), path, rules.max + 1))
    _no_crash_logged(host)


def _fields(
    descriptor: Descriptor, prefix: tuple[FieldDescriptor, ...] = ()
) -> Iterator[tuple[FieldDescriptor, ...]]:
    """Every field reachable from a request, repeated and map fields included (a repeated
    message stands for its first element)."""
    for field in descriptor.fields:
        path = (*prefix, field)
        yield path
        kind = field.message_type
        if kind is None or kind.GetOptions().map_entry or kind.full_name.startswith("google."):
            continue
        if kind not in [f.containing_type for f in path]:  # a type that nests itself: once
            yield from _fields(kind, path)


def _named(path: tuple[FieldDescriptor, ...]) -> str:
    """The path a violation names for the field at the end of ``path`` as a whole."""
    return ".".join([_dotted(path[:-1]), path[-1].name] if len(path) > 1 else [path[0].name])


def _limited() -> Iterator[tuple[str, MethodDescriptor, tuple[FieldDescriptor, ...]]]:
    for service, method in METHODS:
        for path in _fields(method.input_type):
            rules = _field_rules(path[-1])
            if rules.HasField("max_items") or rules.HasField("max_len"):
                yield service, method, path


def _holder(request: Message, path: tuple[FieldDescriptor, ...]) -> Any:
    """The message that holds the field at the end of ``path``, its parents set."""
    target: Any = request
    for field in path[:-1]:
        target = getattr(target, field.name)
        if field.is_repeated:
            target = target[0] if len(target) else target.add()
    return target


def _value(field: FieldDescriptor, length: int = 1) -> Any:
    """A value of a scalar field (an element of a list, a map's value) ``length`` long."""
    if field.type == FieldDescriptor.TYPE_STRING:
        return "x" * length
    if field.type == FieldDescriptor.TYPE_BYTES:
        return b"x" * length
    return 1  # an integer, or an enum's first defined value


def _with_items(request: Message, path: tuple[FieldDescriptor, ...], count: int) -> Message:
    """``request`` with ``count`` valid elements (or map entries) in the field at ``path``."""
    field = path[-1]
    values = getattr(_holder(request, path), field.name)
    kind = field.message_type
    if kind is not None and kind.GetOptions().map_entry:
        value_field = kind.fields_by_name["value"]
        for index in range(count):
            if value_field.message_type is None:
                values[f"k{index}"] = _value(value_field)
            else:
                values[f"k{index}"].SetInParent()
    elif kind is not None:
        for _ in range(count):
            values.add()
    else:
        values.extend([_value(field)] * count)
    return request


def _with_length(
    request: Message, path: tuple[FieldDescriptor, ...], length: int
) -> tuple[Message, str]:
    """``request`` with one string (or bytes) ``length`` long in the field at ``path`` (its
    first element, or the value of the map entry "k"), and the path a violation names."""
    field = path[-1]
    holder = _holder(request, path)
    dotted = _named(path)
    kind = field.message_type
    if kind is not None and kind.GetOptions().map_entry:
        getattr(holder, field.name)["k"] = _value(kind.fields_by_name["value"], length)
        return request, f"{dotted}['k']"
    if field.is_repeated:
        getattr(holder, field.name).append(_value(field, length))
        return request, f"{dotted}[0]"
    setattr(holder, field.name, _value(field, length))
    return request, dotted


def _fill_required(message: Message) -> Message:
    """``message`` with every required field and oneof that is unset set to a valid value,
    in it and in the messages it holds."""
    descriptor = message.DESCRIPTOR
    for oneof in descriptor.oneofs:
        rules = oneof.GetOptions().Extensions[rules_pb2.oneof]  # type: ignore[index]
        if rules.required and message.WhichOneof(oneof.name) is None:
            _set_valid(message, oneof.fields[0])
    for field in descriptor.fields:
        if not _field_rules(field).required:
            continue
        if field.is_repeated:
            unset = not len(getattr(message, field.name))
        elif field.has_presence:
            unset = not message.HasField(field.name)
        else:
            unset = not getattr(message, field.name)
        if unset:
            _set_valid(message, field)
    for field, value in message.ListFields():
        kind = field.message_type
        if kind is None or kind.GetOptions().map_entry or kind.full_name.startswith("google."):
            continue
        for item in value if field.is_repeated else [value]:
            _fill_required(item)
    return message


def _set_valid(message: Message, field: FieldDescriptor) -> None:
    rules = _field_rules(field)
    if field.message_type is not None:
        getattr(message, field.name).SetInParent()
    elif field.is_repeated:
        getattr(message, field.name).append(_value(field))
    elif field.type == FieldDescriptor.TYPE_BOOL:
        setattr(message, field.name, True)
    elif field.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        setattr(message, field.name, _value(field))
    else:
        setattr(message, field.name, max(rules.min, 1) if rules.HasField("min") else 1)


def _passes_the_rules(method: MethodDescriptor, request: Message) -> None:
    """The host's own checks of ``method``'s requests -- the interceptor's, and Pipe's of
    each input -- accept ``request``."""
    check = validation.checker(method.input_type)
    if check is not None:
        check(request)
    for name in validation.ANSWERED_IN_STREAM.get(method.input_type.full_name, ()):
        validation.field_checker(method.input_type, name)(request)


def test_every_declared_count_and_length_is_enforced(host: HostProcess) -> None:
    """Each list, map and string with a declared max_items or max_len, in any request
    (ListRuns' states, GetContext's keys, AgentSpec's env and command, CreateTerminal's argv,
    every name and id...), refuses one item or one character over the limit with a violation
    naming the field and the limit (a Pipe input: in the stream); at the limit, with the
    request's required fields set, the request passes the rules."""
    limited = list(_limited())
    declared = {(m.name, _named(p)) for _, m, p in limited}
    assert {
        ("ListRuns", "states"),
        ("GetContext", "keys"),
        ("DeployAgent", "spec.env"),
        ("DeployAgent", "spec.command"),
        ("CreateTerminal", "argv.args"),
        ("OpenSession", "pipeline.steps[0].trigger.at_turns"),
        ("Pipe", "input.agent"),
    } <= declared
    for service, method, path in limited:
        rules = _field_rules(path[-1])
        make = message_factory.GetMessageClass(method.input_type)
        limits = []
        if rules.HasField("max_items"):
            limit = rules.max_items
            over = _with_items(make(), path, limit + 1)
            limits.append((over, _named(path), limit, _with_items(make(), path, limit)))
        if rules.HasField("max_len"):
            limit = rules.max_len
            over, named = _with_length(make(), path, limit + 1)
            limits.append((over, named, limit, _with_length(make(), path, limit)[0]))
        for over, named, limit, at_limit in limits:
            violations = _violations(host.channel, service, method, path, over)
            assert named in violations, (method.name, named, violations)
            assert f"at most {limit}" in violations[named], (method.name, violations[named])
            _passes_the_rules(method, _fill_required(at_limit))
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
            request = _with(make(), path, invalid)
            violations = _violations(host.channel, service, method, path, request)
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


def test_a_pipe_input_that_breaks_the_rules_is_answered_in_the_stream(host: HostProcess) -> None:
    """On Pipe an input that breaks the rules -- no input, no agent, an agent name too long,
    an undefined enum -- is answered in the stream like an unknown agent: an output with error
    code invalid_argument, the message Execute's INVALID_ARGUMENT carries, the violations in
    its details and its task_id echoed; the other inputs are answered and the stream ends OK.
    Only what concerns the stream (max_in_flight out of range) ends it."""
    too_long = "a" * 257
    inputs = {
        "unknown": agent_input("no-such-agent", "run"),
        "no-agent": agent_input(""),
        "long-name": agent_input(too_long, "run"),
        "bad-enum": agent_input("no-such-agent", "run"),
    }
    inputs["bad-enum"].output_encoding = 99  # type: ignore[assignment]
    for task_id, message in inputs.items():
        message.task_id = task_id
    requests = [agent_io_pb2.PipeRequest(input=m) for m in inputs.values()]
    requests.insert(1, agent_io_pb2.PipeRequest())  # no input at all
    outputs = {
        o.output.task_id: o.output for o in host.agents.Pipe(iter(requests), timeout=DEADLINE)
    }
    assert set(outputs) == {*inputs, ""}
    assert all(o.status == agent_io_pb2.TASK_STATUS_ERROR for o in outputs.values())
    assert outputs["unknown"].error.code != "invalid_argument"
    expected = {
        "": ["input"],
        "no-agent": ["input.agent"],
        "long-name": ["input.agent"],
        "bad-enum": ["input.output_encoding"],
    }
    for task_id, fields in expected.items():
        error = outputs[task_id].error
        assert error.code == "invalid_argument", (task_id, error.code, error.message)
        found = json_format.MessageToDict(error.details)
        assert [v["field"] for v in found["field_violations"]] == fields, found
        if task_id:  # the same message as Execute's status for the same input
            with pytest.raises(grpc.RpcError) as caught:
                host.agents.Execute(
                    agent_io_pb2.ExecuteRequest(input=inputs[task_id]), timeout=DEADLINE
                )
            assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert error.message == caught.value.details()
            assert found["reason"] == details(caught.value)["ErrorInfo"].reason
    with pytest.raises(grpc.RpcError) as stream_level:
        list(
            host.agents.Pipe(
                iter([agent_io_pb2.PipeRequest(input=inputs["unknown"], max_in_flight=5000)]),
                timeout=DEADLINE,
            )
        )
    assert stream_level.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert [v.field for v in details(stream_level.value)["BadRequest"].field_violations] == [
        "max_in_flight"
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


def test_several_broken_rules_are_told_together_under_one_reason(host: HostProcess) -> None:
    """Every broken rule of a request is reported in one answer, one violation each, with
    ErrorInfo.metadata.fields listing the paths: the reason is MISSING_FIELD when each is a
    missing field, INVALID_FIELD as soon as one is something else (docs/errors.md)."""

    def refused(request: Message) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as error:
            next(iter(host.supervisor.StreamLogs(request, timeout=10)))
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        return error.value

    mixed = details(refused(supervisor_pb2.StreamLogsRequest(tail_lines=10_001)))
    assert mixed["ErrorInfo"].reason == "INVALID_FIELD"
    assert set(mixed["ErrorInfo"].metadata["fields"].split(",")) == {"agent", "tail_lines"}
    broken = {v.field: v.description for v in mixed["BadRequest"].field_violations}
    assert set(broken) == {"agent", "tail_lines"}
    assert broken["agent"].startswith("is required") and "10001" in broken["tail_lines"]

    alone = details(refused(supervisor_pb2.StreamLogsRequest()))
    assert alone["ErrorInfo"].reason == "MISSING_FIELD"
    assert alone["ErrorInfo"].metadata["fields"] == "agent"


def test_string_lengths_count_characters_not_bytes(host: HostProcess) -> None:
    """A string's bound counts characters (code points), as its proto comment says: 256 of
    "é" (512 bytes in UTF-8) pass the check of a name of at most 256 characters -- the agent is
    just not there -- and 257 are refused naming the field."""
    fits = agent_io_pb2.GetAgentRequest(name="é" * 256)
    with pytest.raises(grpc.RpcError) as unknown:
        host.agents.GetAgent(fits, timeout=10)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as long:
        host.agents.GetAgent(agent_io_pb2.GetAgentRequest(name="é" * 257), timeout=10)
    assert long.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    violation = details(long.value)["BadRequest"].field_violations[0]
    assert violation.field == "name" and "257 characters" in violation.description
