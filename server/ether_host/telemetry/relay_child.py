"""The trace relay: a child process of a tracing host that exports its spans over OTLP/gRPC
(relay.py says why it is a process of its own).

    python -m ether_host.telemetry.relay_child ENDPOINT [--insecure]

Reads one JSON line per batch on stdin (batches.py writes them through relay.RelayExporter), rebuilds the SDK's
``ReadableSpan`` s and exports them with the maintained ``OTLPSpanExporter``: the encoding is
the SDK's, not ours. Reading never waits for an export: batches wait in a bounded queue (a
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
from typing import Any

import orjson
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

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


def _context(trace_hex: str, span_id: int, flags: int, state: str, is_remote: bool) -> SpanContext:
    return SpanContext(
        int(trace_hex, 16),
        span_id,
        is_remote=is_remote,
        trace_flags=TraceFlags(flags),
        trace_state=TraceState.from_header([state]) if state else None,
    )


def rebuild(row: list[Any], resource: Resource, scope: InstrumentationScope) -> ReadableSpan:
    """A span as the host's spans.HostSpan.end wrote it (spans.Row, same order), back as the
    SDK's ReadableSpan."""
    (trace_hex, span_id, flags, state, parent_id, parent_remote, name, kind) = row[:8]
    (start, end, attributes, code, description, events, links) = row[8:]
    own = _context(trace_hex, span_id, flags, state, False)
    return ReadableSpan(
        name,
        context=own,
        parent=SpanContext(own.trace_id, parent_id, parent_remote) if parent_id else None,
        resource=resource,
        attributes=attributes,
        events=[Event(n, a, timestamp=t) for n, t, a in events or ()],
        links=[Link(_context(t, i, f, s, r), a) for t, i, f, s, r, a in links or ()],
        kind=SpanKind(kind),
        status=Status(StatusCode(code), description),
        start_time=start,
        end_time=end,
        instrumentation_scope=scope,
    )


def _export_loop(
    exporter: OTLPSpanExporter, pending: queue.Queue[list[ReadableSpan] | None]
) -> None:
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
        exporter.export(spans)  # a failure is logged by the exporter itself
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

    exporter = OTLPSpanExporter(endpoint=args.endpoint, insecure=args.insecure)
    pending: queue.Queue[list[ReadableSpan] | None] = queue.Queue(QUEUE_BATCHES)
    worker = threading.Thread(target=_export_loop, args=(exporter, pending), daemon=True)
    worker.start()
    resource = Resource.get_empty()
    dropped = 0
    for line in sys.stdin.buffer:
        batch = orjson.loads(line)
        if "resource" in batch:
            attributes, schema_url = batch["resource"]
            resource = Resource(attributes, schema_url)
        scope = InstrumentationScope(*batch["scope"])
        spans = [rebuild(row, resource, scope) for row in batch["spans"]]
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
