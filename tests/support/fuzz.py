"""Requests for every RPC, generated from the protos' descriptors, and the rule their answers obey.

Hypothesis strategies build any request message field by field: random and huge strings,
negative, huge and boundary numbers, enum numbers the enum lacks, NaN and infinities, deeply
nested Structs, invalid Durations and Timestamps, repeated and map fields; and raw bytes that are
not protobuf at all, sent through a generic stub. ``call`` sends one request the way the
method's kind wants (unary, server stream, client or bidi stream) and returns the status code.

The rule (``check``): a canonical status with a message a person can act on -- never UNKNOWN,
INTERNAL or DATA_LOSS, never a deadline missed by a call that does not wait by design.

Used by tests/host/test_fuzz.py (a bounded, derandomized run in `make test`) and by
`make chaos` (``python -m tests.support.fuzz``: more examples, random, counts per method and
status).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory, struct_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from ether.v1 import (
    agent_io_pb2,
    common_pb2,
    gateway_pb2,
    supervisor_pb2,
    terminal_pb2,
    workflow_pb2,
)

ECHO_AGENT = "fuzz-echo"
STREAM_WINDOW = 0.5  # seconds a stream is read before its deadline cuts it
UNARY_DEADLINE = 20.0
# Methods that wait by design (a condition, an agent's answer): their deadline may pass.
WAITING = {"WaitFor", "Execute", "ResumeRun"}
NEVER = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DATA_LOSS}
HUGE_TEXT = "x" * 70_000
INT_EDGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def services() -> dict[str, Any]:
    found = {}
    for module in (
        agent_io_pb2,
        workflow_pb2,
        supervisor_pb2,
        terminal_pb2,
        gateway_pb2,
        common_pb2,
    ):
        for service in module.DESCRIPTOR.services_by_name.values():
            found[service.full_name] = service
    return found


def methods() -> list[MethodDescriptor]:
    return [m for service in services().values() for m in service.methods]


def path_of(method: MethodDescriptor) -> str:
    return f"/{method.containing_service.full_name}/{method.name}"


# --- strategies ------------------------------------------------------------------------------------


def _text(field_name: str, hints: dict[str, list[str]]) -> st.SearchStrategy[str]:
    special = st.sampled_from(
        ["", " ", "a" * 300, "../../etc/passwd", "-rf", "\x00", "\u0001", "\ud7ff\u202e", "*", ".*"]
    )
    options = [st.text(max_size=24), special, st.just(HUGE_TEXT)]
    if hints.get(field_name):
        options.append(st.sampled_from(hints[field_name]))
    return st.one_of(*options)


def _json_value() -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=12,
    )


def _deep_struct(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


def _struct() -> st.SearchStrategy[Message]:
    def build(value: dict[str, Any]) -> Message:
        message = struct_pb2.Struct()
        with contextlib.suppress(ValueError, TypeError):  # a value Struct cannot hold: empty
            message.update(value)
        return message

    dicts = st.dictionaries(st.text(max_size=8), _json_value(), max_size=4)
    deep = st.sampled_from([20, 40, 120]).map(_deep_struct)
    return st.one_of(dicts, deep).map(build)


def _scalar(field: FieldDescriptor, hints: dict[str, list[str]]) -> st.SearchStrategy[Any]:
    kind = field.cpp_type
    if kind == FieldDescriptor.CPPTYPE_STRING:
        if field.type == FieldDescriptor.TYPE_BYTES:
            return st.one_of(st.binary(max_size=64), st.just(b"\xff" * 70_000))
        return _text(field.name, hints)
    if kind == FieldDescriptor.CPPTYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        if kind == FieldDescriptor.CPPTYPE_FLOAT:
            return st.floats(allow_nan=True, allow_infinity=True, width=32)
        return st.floats(allow_nan=True, allow_infinity=True)
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        assert field.enum_type is not None
        defined = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(defined), st.integers(-3, 120))
    low, high = INT_EDGES[kind]
    edges = [v for v in (low, -1, 0, 1, 2, 64, 1000, 1001, 1025, 5000, high) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def message_strategy(
    descriptor: Descriptor, hints: dict[str, list[str]], depth: int = 0
) -> st.SearchStrategy[Message]:
    """Any message of this type, its fields set or not, nested messages to a bounded depth."""
    if descriptor.full_name == "google.protobuf.Struct":
        return _struct()
    cls = message_factory.GetMessageClass(descriptor)
    if descriptor.full_name in ("google.protobuf.Duration", "google.protobuf.Timestamp"):
        seconds = st.one_of(
            st.sampled_from([-1, 0, 1, 3, 10**12]), st.integers(-(2**63), 2**63 - 1)
        )
        nanos = st.one_of(
            st.sampled_from([0, 5, -5, 999_999_999]), st.integers(-(2**31), 2**31 - 1)
        )
        return st.builds(lambda s, n: cls(seconds=s, nanos=n), seconds, nanos)
    if depth > 3 or descriptor.full_name.startswith("google.protobuf."):
        return st.just(cls())
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key = _scalar(field.message_type.fields_by_name["key"], hints)
            value_field = field.message_type.fields_by_name["value"]
            value = (
                message_strategy(value_field.message_type, hints, depth + 1)
                if value_field.message_type is not None
                else _scalar(value_field, hints)
            )
            optional[field.name] = st.dictionaries(key, value, max_size=3)
            continue
        one = (
            message_strategy(field.message_type, hints, depth + 1)
            if field.message_type is not None
            else _scalar(field, hints)
        )
        repeated = field.is_repeated
        optional[field.name] = st.lists(one, max_size=3) if repeated else one

    def build(values: dict[str, Any]) -> Message:
        message = cls()
        for name, value in values.items():
            field = descriptor.fields_by_name[name]
            try:
                if field.message_type is not None and field.message_type.GetOptions().map_entry:
                    target = getattr(message, name)
                    for k, v in value.items():
                        if isinstance(v, Message):
                            target[k].CopyFrom(v)
                        else:
                            target[k] = v
                elif field.is_repeated:
                    target = getattr(message, name)
                    for item in value:
                        if isinstance(item, Message):
                            target.add().CopyFrom(item)
                        else:
                            target.append(item)
                elif isinstance(value, Message):
                    getattr(message, name).CopyFrom(value)
                else:
                    setattr(message, name, value)
            except (ValueError, TypeError):  # a value this field cannot hold (closed enum...)
                continue
        return message

    return st.fixed_dictionaries({}, optional=optional).map(build)


def requests(
    method: MethodDescriptor, hints: dict[str, list[str]]
) -> st.SearchStrategy[list[Message]]:
    """One request (or, for a client stream, one to three) for ``method``."""
    one = message_strategy(method.input_type, hints).map(lambda m: _defang(method, m))
    if method.client_streaming:
        return st.lists(one, min_size=1, max_size=3)
    return one.map(lambda m: [m])


def _defang(method: MethodDescriptor, request: Message) -> Message:
    """What a fuzzer must not do to the machine it runs on: deploy a real folder (``/`` is a
    folder; the install would walk the whole disk)."""
    if method.name == "DeployAgent" and request.HasField("spec"):
        spec = request.spec  # type: ignore[attr-defined]
        spec.path = "/nonexistent-ether-fuzz/" + spec.path
    return request


# --- calls ------------------------------------------------------------------------------------------


@dataclass
class Answer:
    code: grpc.StatusCode
    details: str


def call(
    channel: grpc.Channel, method: MethodDescriptor, messages: list[Any], *, raw: bool = False
) -> Answer:
    """Send ``messages`` (protobuf messages, or bytes with ``raw``) as ``method`` wants them."""
    path = path_of(method)
    serialize: Callable[[Any], bytes] = (lambda b: b) if raw else (lambda m: m.SerializeToString())
    response_class = message_factory.GetMessageClass(method.output_type)
    deserialize = response_class.FromString
    try:
        codec: dict[str, Any] = {
            "request_serializer": serialize,
            "response_deserializer": deserialize,
        }
        if not method.client_streaming and not method.server_streaming:
            channel.unary_unary(path, **codec)(messages[0], timeout=UNARY_DEADLINE)
        elif not method.client_streaming:
            _drain(channel.unary_stream(path, **codec)(messages[0], timeout=STREAM_WINDOW))
        elif not method.server_streaming:
            channel.stream_unary(path, **codec)(iter(messages), timeout=UNARY_DEADLINE)
        else:
            _drain(channel.stream_stream(path, **codec)(iter(messages), timeout=STREAM_WINDOW))
    except grpc.RpcError as error:
        return Answer(error.code(), error.details() or "")
    return Answer(grpc.StatusCode.OK, "")


def _drain(stream: Iterator[Any]) -> None:
    """Read a few responses; a stream still open when its window ends is cut by the deadline."""
    for count, _ in enumerate(stream):
        if count >= 3:
            stream.cancel()  # type: ignore[attr-defined]
            return


def check(method: MethodDescriptor, answer: Answer) -> str | None:
    """Why ``answer`` breaks the rule, or None."""
    if answer.code in NEVER:
        return f"{path_of(method)} answered {answer.code.name}: {answer.details}"
    if answer.code == grpc.StatusCode.OK:
        return None
    if answer.code == grpc.StatusCode.DEADLINE_EXCEEDED:
        if method.server_streaming or method.name in WAITING:
            return None
        return f"{path_of(method)} stalled past its {UNARY_DEADLINE:g} s deadline"
    if answer.code == grpc.StatusCode.CANCELLED and method.server_streaming:
        return None  # we cancelled it after a few responses
    if not answer.details.strip():
        return f"{path_of(method)} answered {answer.code.name} with no message"
    return None


# --- `make chaos`: more examples, random, counted ------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Fuzz a running host: ``--examples`` per method (random), counts per method and status."""
    from hypothesis import given, settings

    parser = argparse.ArgumentParser(prog="python -m tests.support.fuzz")
    parser.add_argument("address")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--agent", default=ECHO_AGENT, help="an agent Execute calls may reach")
    args = parser.parse_args(argv)
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    broken: list[str] = []
    hints = {"agent": [args.agent]}
    run_settings = settings(max_examples=args.examples, deadline=None, database=None)
    garbage = st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=2)

    def fuzz_one(channel: grpc.Channel, method: MethodDescriptor) -> None:
        def record(messages: list[Any], raw: bool) -> None:
            answer = call(channel, method, messages, raw=raw)
            counts[path_of(method)][answer.code.name] += 1
            why = check(method, answer)
            if why:
                broken.append(why)

        @run_settings
        @given(requests(method, hints))
        def generated(messages: list[Any]) -> None:
            record(messages, False)

        @settings(run_settings, max_examples=max(1, args.examples // 4))
        @given(garbage)
        def raw_bytes(chunks: list[bytes]) -> None:
            record(chunks, True)

        generated()
        raw_bytes()

    with grpc.insecure_channel(args.address) as channel:
        for method in methods():
            fuzz_one(channel, method)
    for path, by_code in sorted(counts.items()):
        print(f"{path}: " + ", ".join(f"{code} {n}" for code, n in sorted(by_code.items())))
    total = sum(sum(c.values()) for c in counts.values())
    print(f"fuzz: {total} calls, {len(broken)} broke the rule")
    for why in broken[:20]:
        print(f"  {why}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
