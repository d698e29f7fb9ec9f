"""The trace relay writes OTLP spans as bytes (server/ether_host/telemetry/otlp_wire.py): what
a collector parses from them must be, field for field, what opentelemetry-proto's own message
classes make of the same rows (the SDK's encoder's choices: kinds, flags, an empty status).
The end-to-end tests (test_tracing.py, test_trace_relay.py) export through a real OTLP
receiver; this one covers every kind of value and field a row can hold."""

from __future__ import annotations

import random
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    InstrumentationScope,
    KeyValue,
)
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import (
    ResourceSpans,
    ScopeSpans,
    Span,
    SpanFlags,
    Status,
)

from ether_host.telemetry.otlp_wire import SpanWriter, export_request

_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


# The reference: a row made into messages the way the relay did before it wrote bytes.
def _value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_value(v) for v in value]))
    return AnyValue(string_value=str(value))


def _attributes(found: dict[str, Any] | None) -> list[KeyValue] | None:
    return [KeyValue(key=k, value=_value(v)) for k, v in found.items()] if found else None


def _flags(is_remote: bool) -> int:
    return _HAS_IS_REMOTE | _IS_REMOTE if is_remote else _HAS_IS_REMOTE


def _message(row: list[Any]) -> Span:
    (trace_hex, span_id, _, state, parent_id, parent_remote, name, kind) = row[:8]
    (start, end, attributes, code, description, events, links) = row[8:]
    return Span(
        trace_id=bytes.fromhex(trace_hex),
        span_id=span_id.to_bytes(8, "big"),
        trace_state=state,
        parent_span_id=parent_id.to_bytes(8, "big") if parent_id else b"",
        name=name,
        kind=kind + 1,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        attributes=_attributes(attributes),
        events=[
            Span.Event(name=n, time_unix_nano=t, attributes=_attributes(a))
            for n, t, a in events or ()
        ],
        links=[
            Span.Link(
                trace_id=bytes.fromhex(t),
                span_id=i.to_bytes(8, "big"),
                trace_state=s,
                attributes=_attributes(a),
                flags=_flags(r),
            )
            for t, i, _, s, r, a in links or ()
        ],
        status=Status(code=code, message=description or ""),
        flags=_flags(parent_remote),
    )


def _rows(count: int) -> list[list[Any]]:
    """Rows as spans.HostSpan.end writes them, over every kind of field and value."""
    pick = random.Random(27)
    values: list[Any] = [
        "echo",
        "",
        "ünïcödé ✓ 𝄞",
        "x" * 300,  # a length past one varint byte
        0,
        1,
        127,
        128,
        -1,
        -(1 << 63),
        (1 << 63) - 1,
        1.5,
        -0.0,
        1e300,
        True,
        False,
        ["a", 2, True, 3.25],
        [],
    ]
    rows = []
    for number in range(count):
        attributes = {f"key.{k}": pick.choice(values) for k in range(pick.randrange(0, 6))}
        events = [
            [f"event {e}", pick.getrandbits(63), {"n": e} if e % 2 else None]
            for e in range(pick.randrange(0, 3))
        ]
        links = [
            [
                f"{pick.getrandbits(128) or 1:032x}",
                pick.getrandbits(64) or 1,
                1,
                pick.choice(["", "vendor=value"]),
                pick.choice([True, False]),
                pick.choice([None, {"link.kind": "follows"}]),
            ]
            for _ in range(pick.randrange(0, 2))
        ]
        code = pick.choice([0, 1, 2])
        rows.append(
            [
                f"{pick.getrandbits(128) or 1:032x}",
                pick.getrandbits(64) or 1,
                1,
                pick.choice(["", "ether=1,other=two"]),
                pick.choice([0, pick.getrandbits(64) or 1]),
                pick.choice([True, False]),
                pick.choice(["ether.v1.AgentIO/Execute", "ether.task echo.echo", f"span {number}"]),
                pick.randrange(0, 5),
                pick.getrandbits(63),
                pick.getrandbits(63),
                attributes or None,
                code,
                "UNAVAILABLE: agent gone" if code == 2 else None,
                events or None,
                links or None,
            ]
        )
    return rows


def test_every_span_reads_back_as_the_message_classes_make_it() -> None:
    writer = SpanWriter()
    for row in _rows(400) * 2:  # twice: the second time from the writer's caches
        written = Span.FromString(writer.span(row))
        assert written == _message(row), row


def test_the_export_request_carries_the_resource_the_scope_and_every_span() -> None:
    writer = SpanWriter()
    rows = _rows(50)
    resource_attributes = {"service.name": "ether", "telemetry.sdk.language": "python"}
    request = ExportTraceServiceRequest.FromString(
        export_request(
            writer.resource(resource_attributes),
            writer.scope("ether_host", "0.1.0"),
            "https://opentelemetry.io/schemas/1.11.0",
            [writer.span(row) for row in rows],
        )
    )
    expected = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=_attributes(resource_attributes)),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name="ether_host", version="0.1.0"),
                        spans=[_message(row) for row in rows],
                    )
                ],
                schema_url="https://opentelemetry.io/schemas/1.11.0",
            )
        ]
    )
    assert request == expected
