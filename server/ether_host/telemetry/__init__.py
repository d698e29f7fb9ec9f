"""What the host tells about itself: traces (tracing.py) and metrics (docs/telemetry.md)."""

from opentelemetry.trace import Link, Span

from ether_host.telemetry.tracing import (
    TRACEPARENT,
    TRACESTATE,
    Tracing,
    annotate,
    build_provider,
    carrier_of,
    fail,
    log_ids,
    optional_span,
    set_error,
    trace_id_of,
)

__all__ = [
    "TRACEPARENT",
    "TRACESTATE",
    "Link",
    "Span",
    "Tracing",
    "annotate",
    "build_provider",
    "carrier_of",
    "fail",
    "log_ids",
    "optional_span",
    "set_error",
    "trace_id_of",
]
