"""The trace relay: a child process of a tracing host that exports its spans over OTLP/gRPC
(relay.py says why it is a process of its own).

    python -m ether_host.telemetry.relay_child ENDPOINT [--insecure]

Reads one JSON line per batch on stdin (batches.py writes them through relay.RelayExporter),
makes each row (spans.Row) the OTLP ``Span`` message the SDK's encoder makes of a span (same
fields, kinds, flags and attribute values; opentelemetry-proto's messages, upb underneath), and
exports them with the maintained ``OTLPSpanExporter`` (its channel, TLS, compression, retries).
Measured: rebuilding the SDK's ReadableSpans for its encoder took ~32 µs of this process's CPU
per span, on a machine where the host, its agents and the relay share two cores. Reading never
waits for an export: batches wait in a bounded queue (a
batch that finds it full is dropped, and the log says so once). At EOF -- the host's stop
closed the pipe, or the host died -- it exports what it holds within ``FINAL_BUDGET`` and
exits, so nothing is left behind. Its log is JSON lines on stderr (logger, level, event) that
the host writes into its own log.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import orjson
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
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

# At EOF: the export of what is left gets this long, then the process exits regardless (a
# collector out of reach would otherwise hold it through the exporter's retries).
FINAL_BUDGET = 3.0
# Batches (up to the host's max_export_batch_size spans each) held while an export runs.
QUEUE_BATCHES = 64
# Spans sent in one export request when several batches waited.
EXPORT_MAX_SPANS = 2048
LOGGER = "ether_host.telemetry.relay"


def say(logger: str, level: str, event: str) -> None:
    """One log line for the host to re-log; nothing when the host is gone (stderr closed)."""
    try:
        sys.stderr.buffer.write(
            orjson.dumps({"logger": logger, "level": level, "event": event}) + b"\n"
        )
        sys.stderr.buffer.flush()
    except (OSError, ValueError):
        pass


class _ToHost(logging.Handler):
    """The OTLP exporter's log records (an export that failed) as lines for the host."""

    def emit(self, record: logging.LogRecord) -> None:
        say(record.name, record.levelname.lower(), record.getMessage())


_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK


def _value(value: Any) -> AnyValue:
    """An attribute value as OTLP's AnyValue (bool before int: a bool is an int in Python)."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_value(v) for v in value]))
    return AnyValue(string_value=str(value))


# Attributes already made, by (key, value, type): most repeat from span to span (the agent's
# name, the action, the RPC's method), and copying a made KeyValue into a span costs less than
# making it again. Emptied when full: task ids and pids never repeat.
_MADE: dict[tuple[str, Any, type], KeyValue] = {}
_MADE_MOST = 4096


def _attributes(found: dict[str, Any] | None) -> list[KeyValue] | None:
    if not found:
        return None
    made = []
    for key, value in found.items():
        known = (key, value, type(value)) if not isinstance(value, list) else None
        pair = _MADE.get(known) if known is not None else None
        if pair is None:
            pair = KeyValue(key=key, value=_value(value))
            if known is not None:
                if len(_MADE) >= _MADE_MOST:
                    _MADE.clear()
                _MADE[known] = pair
        made.append(pair)
    return made


def _flags(is_remote: bool) -> int:
    """What the SDK's encoder writes: whether the parent (or a link) came from another process."""
    return _HAS_IS_REMOTE | _IS_REMOTE if is_remote else _HAS_IS_REMOTE


def encode(row: list[Any]) -> Span:
    """A span as the host's spans.HostSpan.end wrote it (spans.Row, same order) as OTLP's Span."""
    (trace_hex, span_id, _, state, parent_id, parent_remote, name, kind) = row[:8]
    (start, end, attributes, code, description, events, links) = row[8:]
    return Span(
        trace_id=bytes.fromhex(trace_hex),
        span_id=span_id.to_bytes(8, "big"),
        trace_state=state,
        parent_span_id=parent_id.to_bytes(8, "big") if parent_id else b"",
        name=name,
        kind=kind + 1,  # SpanKind.INTERNAL (0) is SPAN_KIND_INTERNAL (1), and so on
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


class RowExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC exporter, given OTLP Span messages instead of ReadableSpans: only
    its translation step (``_translate_data``, what its ``export`` calls) is ours."""

    resource = Resource()
    resource_schema = ""
    scope = InstrumentationScope()

    def _translate_data(self, data: Sequence[Any]) -> ExportTraceServiceRequest:
        return ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    resource=self.resource,
                    scope_spans=[ScopeSpans(scope=self.scope, spans=data)],
                    schema_url=self.resource_schema,
                )
            ]
        )


def _export_loop(exporter: RowExporter, pending: queue.Queue[list[Span] | None]) -> None:
    """Export the batches as they come, several at once when they waited; None ends it."""
    while True:
        spans = pending.get()
        if spans is None:
            return
        ending = False
        while len(spans) < EXPORT_MAX_SPANS:
            try:
                more = pending.get_nowait()
            except queue.Empty:
                break
            if more is None:
                ending = True
                break
            spans.extend(more)
        # Messages, not the ReadableSpans its signature names (RowExporter); a failure is
        # logged by the exporter itself.
        exporter.export(spans)  # type: ignore[arg-type]
        if ending:
            return


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="relay_child")
    parser.add_argument("endpoint")
    parser.add_argument("--insecure", action="store_true")
    args = parser.parse_args(argv)
    library = logging.getLogger("opentelemetry")
    library.handlers = [_ToHost()]
    library.setLevel(logging.WARNING)
    library.propagate = False

    exporter = RowExporter(endpoint=args.endpoint, insecure=args.insecure)
    pending: queue.Queue[list[Span] | None] = queue.Queue(QUEUE_BATCHES)
    worker = threading.Thread(target=_export_loop, args=(exporter, pending), daemon=True)
    worker.start()
    dropped = 0
    for line in sys.stdin.buffer:
        batch = orjson.loads(line)
        if "resource" in batch:  # the first batch: the same for every later one
            attributes, schema_url = batch["resource"]
            exporter.resource = Resource(attributes=_attributes(attributes))
            exporter.resource_schema = schema_url or ""
            name, version, _ = batch["scope"]
            exporter.scope = InstrumentationScope(name=name, version=version or "")
        spans = [encode(row) for row in batch["spans"]]
        try:
            pending.put_nowait(spans)
        except queue.Full:
            if not dropped:
                say(LOGGER, "warning", "the collector is slower than the host: spans dropped")
            dropped += len(spans)

    # EOF: the host stopped or died. What is queued goes out within FINAL_BUDGET.
    deadline = time.monotonic() + FINAL_BUDGET
    with contextlib.suppress(queue.Full):
        pending.put(None, timeout=FINAL_BUDGET)
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        say(LOGGER, "warning", f"spans not exported within {FINAL_BUDGET} s of the host's end")
    if dropped:
        say(LOGGER, "warning", f"{dropped} spans dropped: the collector was slower than the host")
    exporter.shutdown(timeout_millis=0)
    os._exit(0)  # not waiting for an export still running past the budget


if __name__ == "__main__":
    main()
