"""The trace relay's spans as OTLP protobuf bytes, written directly from the host's rows
(spans.Row), for ``relay_child`` to hand to the SDK's OTLP exporter.

Why not opentelemetry-proto's message classes, as before: measured in the relay at 64 traced
Execute calls in flight (bench/telemetry.py, issue 25, py-spy of the relay, 2026-11-27), making
each ``Span`` message (its kwargs constructor copying every KeyValue, Status and event in) was
half of the relay's CPU, some 15 µs per span; and the relay shares this machine's two cores
with the host, its agents and the callers, so every µs it spends is taken from them. Here a
span is a join of byte strings, most of them made once and kept (the attributes that repeat
from span to span, the span names); the exporter sends the request's bytes as they are
(relay_child.SerializedTraceStub). tests/host/test_otlp_wire.py holds this to what the
message classes make of the same rows, field for field.

The field numbers are opentelemetry-proto's (opentelemetry/proto/trace/v1/trace.proto,
common/v1/common.proto, collector/trace/v1/trace_service.proto); a field at its proto3
default is left out where the message classes leave it out, and a oneof member or a message
field set explicitly is written even when empty, as they write it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

_FIXED64 = struct.Struct("<Q").pack
_FIXED32 = struct.Struct("<I").pack
_DOUBLE = struct.Struct("<d").pack
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# SpanFlags: the context's is-remote bit is known (always written, as the SDK's encoder does),
# and whether the parent (or a link) is remote.
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_LOCAL_FLAGS = _FIXED32(_HAS_IS_REMOTE)
_REMOTE_FLAGS = _FIXED32(_HAS_IS_REMOTE | _IS_REMOTE)
_STATUS_UNSET = b"\x7a\x00"  # Span.status (15): an empty Status, as the SDK writes for UNSET


def varint(number: int) -> bytes:
    """A protobuf varint; a negative int64 as its 64-bit two's complement (ten bytes)."""
    if 0 <= number < 0x80:
        return bytes((number,))
    if number < 0:
        number += 1 << 64
    out = bytearray()
    while number > 0x7F:
        out.append((number & 0x7F) | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def _length(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    return tag + varint(len(payload)) + payload


def _text(tag: bytes, text: str) -> bytes:
    return _length(tag, text.encode("utf-8", "surrogatepass"))


def any_value(value: Any) -> bytes:
    """AnyValue: a bool before an int (a bool is an int in Python); an int that int64 cannot
    hold, and any other kind, as its text (the message classes would refuse the int)."""
    if value is True or value is False:
        return b"\x10\x01" if value else b"\x10\x00"  # bool_value (2)
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return b"\x18" + varint(value)  # int_value (3)
    if type(value) is float:
        return b"\x21" + _DOUBLE(value)  # double_value (4)
    if type(value) is list:  # array_value (5): an ArrayValue of values (1)
        return _length(b"\x2a", b"".join(_length(b"\x0a", any_value(v)) for v in value))
    return _text(b"\x0a", value if type(value) is str else str(value))  # string_value (1)


class SpanWriter:
    """Rows to OTLP ``Span`` bytes, keeping what repeats: the KeyValue of an attribute seen
    before (by key, value and type: an agent's name, an action, an RPC's method) and the name
    field of a span name seen before. Each cache is emptied when full: task ids and pids never
    repeat."""

    MOST = 4096

    def __init__(self) -> None:
        self._pairs: dict[tuple[bytes, str, Any, type], bytes] = {}
        self._names: dict[str, bytes] = {}

    def _attributes(self, tag: bytes, found: dict[str, Any] | None) -> bytes:
        """Each attribute as a KeyValue field under ``tag`` (key 1, value 2)."""
        if not found:
            return b""
        pairs = self._pairs
        out = []
        for key, value in found.items():
            kind = type(value)
            known = (tag, key, value, kind) if kind is not list else None
            field = pairs.get(known) if known is not None else None
            if field is None:
                field = _length(tag, _text(b"\x0a", key) + _length(b"\x12", any_value(value)))
                if known is not None:
                    if len(pairs) >= self.MOST:
                        pairs.clear()
                    pairs[known] = field
            out.append(field)
        return b"".join(out)

    def resource(self, attributes: dict[str, Any] | None) -> bytes:
        """A serialized Resource: its attributes (1)."""
        return self._attributes(b"\x0a", attributes)

    @staticmethod
    def scope(name: str, version: str | None) -> bytes:
        """A serialized InstrumentationScope: name (1), version (2)."""
        return (_text(b"\x0a", name) if name else b"") + (
            _text(b"\x12", version) if version else b""
        )

    def span(self, row: list[Any] | tuple[Any, ...]) -> bytes:
        """One row (spans.Row: the order HostSpan.end writes) as a serialized ``Span``."""
        (trace_hex, span_id, _, state, parent_id, parent_remote, name, kind) = row[:8]
        (start, end, attributes, code, description, events, links) = row[8:]
        named = self._names.get(name)
        if named is None:
            if len(self._names) >= self.MOST:
                self._names.clear()
            named = self._names[name] = _text(b"\x2a", name)  # name (5)
        parts = [
            b"\x0a\x10" + bytes.fromhex(trace_hex),  # trace_id (1)
            b"\x12\x08" + span_id.to_bytes(8, "big"),  # span_id (2)
        ]
        if state:
            parts.append(_text(b"\x1a", state))  # trace_state (3)
        if parent_id:
            parts.append(b"\x22\x08" + parent_id.to_bytes(8, "big"))  # parent_span_id (4)
        parts.append(named)
        parts.append(b"\x30" + varint(kind + 1))  # kind (6): SpanKind.INTERNAL (0) is 1, ...
        parts.append(b"\x39" + _FIXED64(start))  # start_time_unix_nano (7)
        parts.append(b"\x41" + _FIXED64(end))  # end_time_unix_nano (8)
        if attributes:
            parts.append(self._attributes(b"\x4a", attributes))  # attributes (9)
        for event_name, stamp, event_attributes in events or ():  # events (11)
            parts.append(
                _length(
                    b"\x5a",
                    b"\x09"  # time_unix_nano (1)
                    + _FIXED64(stamp)
                    + _text(b"\x12", event_name)  # name (2)
                    + self._attributes(b"\x1a", event_attributes),  # attributes (3)
                )
            )
        for link in links or ():  # links (13)
            parts.append(self._link(link))
        if code or description:  # status (15): message (2), code (3)
            parts.append(
                _length(
                    b"\x7a",
                    (_text(b"\x12", description) if description else b"")
                    + (b"\x18" + varint(code) if code else b""),
                )
            )
        else:
            parts.append(_STATUS_UNSET)
        parts.append(b"\x85\x01" + (_REMOTE_FLAGS if parent_remote else _LOCAL_FLAGS))  # (16)
        return b"".join(parts)

    def _link(self, link: list[Any]) -> bytes:
        trace_hex, span_id, _, state, is_remote, attributes = link
        return _length(
            b"\x6a",
            b"\x0a\x10"  # trace_id (1)
            + bytes.fromhex(trace_hex)
            + b"\x12\x08"  # span_id (2)
            + span_id.to_bytes(8, "big")
            + (_text(b"\x1a", state) if state else b"")  # trace_state (3)
            + self._attributes(b"\x22", attributes)  # attributes (4)
            + b"\x35"  # flags (6)
            + (_REMOTE_FLAGS if is_remote else _LOCAL_FLAGS),
        )


def export_request(resource: bytes, scope: bytes, schema_url: str, spans: Iterable[bytes]) -> bytes:
    """A serialized ExportTraceServiceRequest: one ResourceSpans (``resource``: a serialized
    Resource) holding one ScopeSpans (``scope``: a serialized InstrumentationScope) of
    ``spans``."""
    scope_spans = _length(b"\x0a", scope) + b"".join(_length(b"\x12", span) for span in spans)
    resource_spans = _length(b"\x0a", resource) + _length(b"\x12", scope_spans)
    if schema_url:
        resource_spans += _text(b"\x1a", schema_url)
    return _length(b"\x0a", resource_spans)
