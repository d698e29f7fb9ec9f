"""The trace relay: a child process of a tracing host that exports its spans over OTLP/gRPC
(relay.py says why it is a process of its own).

    python -m ether_host.telemetry.relay_child ENDPOINT [--insecure]

Reads one JSON line per batch on stdin (batches.py writes them through relay.RelayExporter),
writes each row (spans.Row) as the OTLP ``Span`` the SDK's encoder makes of a span (same
fields, kinds, flags and attribute values: otlp_wire.py, which says why bytes), and exports
them with the maintained ``OTLPSpanExporter`` (its channel, TLS, compression, retries).
Measured: rebuilding the SDK's ReadableSpans for its encoder took ~32 µs of this process's CPU
per span, on a machine where the host, its agents and the relay share two cores; making
opentelemetry-proto's messages of them, ~15 µs. Reading never
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
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from ether_host.telemetry.otlp_wire import SpanWriter, export_request

# At EOF: the export of what is left gets this long, then the process exits regardless (a
# collector out of reach would otherwise hold it through the exporter's retries).
FINAL_BUDGET = 3.0
# Batches (up to the host's max_export_batch_size spans each) held while an export runs.
QUEUE_BATCHES = 64
# Spans sent in one export request when several batches waited.
EXPORT_MAX_SPANS = 2048
LOGGER = "ether_host.telemetry.relay"
EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


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


class SerializedTraceStub:
    """TraceService's stub whose ``Export`` takes the request already serialized: a gRPC method
    with no request serializer sends the bytes it is given as they are. (``channel`` is the SDK
    exporter's grpc channel; the core names no grpc type, tests/host/test_layers.py.)"""

    def __init__(self, channel: Any) -> None:
        self.Export = channel.unary_unary(
            EXPORT_METHOD,
            request_serializer=None,
            response_deserializer=ExportTraceServiceResponse.FromString,
        )


class RowExporter(OTLPSpanExporter):
    """The SDK's OTLP/gRPC exporter (its channel, TLS, compression, headers, retries and
    reconnection), given serialized OTLP spans (otlp_wire.SpanWriter) instead of ReadableSpans:
    its translation step (``_translate_data``, what its ``export`` calls) is ours and makes the
    request's bytes, which its stub (SerializedTraceStub, also the one it makes again when it
    reconnects) sends as they are. Parsing them into the message for the SDK's stub to
    serialize again cost the relay ~2 µs per span (bench/RESULTS.md, "Telemetry: where full
    tracing's cost goes")."""

    resource = b""  # a serialized Resource and InstrumentationScope (the host's first batch)
    resource_schema = ""
    scope = b""

    def __init__(self, *, endpoint: str, insecure: bool) -> None:
        super().__init__(endpoint=endpoint, insecure=insecure)
        self._stub = SerializedTraceStub
        # The SDK types its client as its own stub's, optional (None once shut down).
        self._client = SerializedTraceStub(self._channel)  # type: ignore[assignment]

    def _translate_data(self, data: Sequence[Any]) -> bytes:  # type: ignore[override]
        return export_request(self.resource, self.scope, self.resource_schema, data)


def _export_loop(exporter: RowExporter, pending: queue.Queue[list[bytes] | None]) -> None:
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
        # Serialized spans, not the ReadableSpans its signature names (RowExporter); a failure
        # is logged by the exporter itself.
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
    writer = SpanWriter()
    pending: queue.Queue[list[bytes] | None] = queue.Queue(QUEUE_BATCHES)
    worker = threading.Thread(target=_export_loop, args=(exporter, pending), daemon=True)
    worker.start()
    dropped = 0
    for line in sys.stdin.buffer:
        batch = orjson.loads(line)
        if "resource" in batch:  # the first batch: the same for every later one
            attributes, schema_url = batch["resource"]
            exporter.resource = writer.resource(attributes)
            exporter.resource_schema = schema_url or ""
            name, version, _ = batch["scope"]
            exporter.scope = writer.scope(name, version)
        spans = [writer.span(row) for row in batch["spans"]]
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
