"""W3C trace context on the stdio link: read from task frames, written on call frames.

The host puts the task span's ``traceparent`` (and ``tracestate``) on a traced task; a call
frame may carry one back, and the host parents the call's span on it. The SDK never needs
OpenTelemetry: when the agent itself has imported it and opened a span, that span's context
is what a call carries, so the agent's span is the parent of the calls made inside it.
"""

from __future__ import annotations

import re
import sys
from typing import Any

# W3C Trace Context level 1: version-traceid-spanid-flags, lowercase hex. A later version may
# append fields after a dash; version ff is invalid; all-zero ids are invalid.
_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def valid_traceparent(value: Any) -> str | None:
    """``value`` when it is a valid W3C traceparent, else None (a malformed one is dropped)."""
    if not isinstance(value, str):
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    version, trace_id, span_id, _flags, rest = match.groups()
    if version == "ff" or (version == "00" and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return value


def task_trace_context(frame: dict[str, Any]) -> tuple[str | None, str | None]:
    """The task frame's (traceparent, tracestate); tracestate only with a valid traceparent
    (W3C: without one it means nothing)."""
    parent = valid_traceparent(frame.get("traceparent"))
    if parent is None:
        return None, None
    state = frame.get("tracestate")
    return parent, state if isinstance(state, str) and state else None


def current_span_context() -> tuple[str, str | None] | None:
    """The (traceparent, tracestate) of the OpenTelemetry span current in this thread or
    task, or None: OpenTelemetry not imported by the agent, no span, or an invalid one.

    Only ``sys.modules`` is looked at: the SDK never imports OpenTelemetry itself, so an agent
    that does not use it pays nothing and needs nothing installed.
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    try:
        span_context = trace.get_current_span().get_span_context()
        if not span_context.is_valid:
            return None
        parent = (
            f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-"
            f"{int(span_context.trace_flags) & 0xFF:02x}"
        )
        state = span_context.trace_state.to_header() if span_context.trace_state else ""
    except Exception:  # an OpenTelemetry we do not know must never fail a host call
        return None
    return parent, state or None
