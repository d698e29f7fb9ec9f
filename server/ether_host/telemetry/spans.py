"""The host's own spans: made and ended on the event loop as a few plain fields, each ended one
handed on as one tuple (batches.py sends them to the relay child, which builds the OTLP spans).

Why not the OpenTelemetry SDK's spans: measured at 64 Execute calls in flight
(bench/telemetry.py, issue 25, 2026-11-26), every call traced cost -36 % calls/s with the SDK
(+46 % host CPU per call), and still -30 % with the spans made but never exported: its span
objects (a lock and bounded, validated attribute and event containers each, a ReadableSpan
copied at the end, the span processors' calls), its sampler, a SpanContext (3.7 µs alone) and
the context machinery around every span, for the two spans an Execute makes. Timed in one
process (the calls an Execute makes on them, 2026-11-26): 46 µs per Execute with the SDK,
6.5 µs here; not sampled, 13.6 µs with the SDK, 5.6 µs here. The host only ever makes spans of
its own, with attributes it writes itself, so it records what OTLP needs and nothing more: ids
from ``random.getrandbits`` (the SDK's own source), ``time.time_ns`` stamps, the attributes as
one dict. What agents and users see is unchanged: each span is an ``opentelemetry.trace.Span``
(the API), a W3C ``traceparent`` continues a trace and is passed to agents, links are the API's
``Link``, and the relay sends opentelemetry-proto's messages with the SDK's OTLP exporter.

Sampling is the SDK's ``ParentBased(TraceIdRatioBased(ratio))``: a trace the host starts is
sampled when its trace id's low 64 bits fall under ``ratio``; a span with a parent (the
caller's, an agent's, the host's own) follows the parent's sampled flag. A span not sampled
is an ``UnsampledSpan``: ids for the trace context passed on, nothing recorded.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from random import getrandbits
from typing import Any, Protocol

from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState
from opentelemetry.util import types

_SAMPLED = 1  # TraceFlags.SAMPLED
_MASK_64 = (1 << 64) - 1
_INTERNAL = SpanKind.INTERNAL.value
_UNSET, _OK, _ERROR = StatusCode.UNSET.value, StatusCode.OK.value, StatusCode.ERROR.value

# An ended span as batches.py sends it and relay_child.rebuild reads it (same order): trace id
# (hex: 128 bits is more than a JSON number keeps), span id, trace flags, tracestate header,
# parent span id (0: none) and whether the parent came from another process, name, kind,
# start and end (ns since the epoch), attributes, status code and description, events
# ([name, ns, attributes]), links ([trace id hex, span id, flags, tracestate, is_remote,
# attributes]).
Row = tuple[Any, ...]
Sink = Callable[[Row], None]


class Parent(Protocol):
    """What a new span takes from its parent: the host's own span or a remote one."""

    trace_id: int
    span_id: int
    trace_hex: str
    flags: int
    state: str
    is_remote: bool


class RemoteParent:
    """A span of another process (a client's ``traceparent``, an agent's own span)."""

    __slots__ = ("flags", "span_id", "state", "trace_hex", "trace_id")
    is_remote = True

    def __init__(self, context: SpanContext) -> None:
        self.trace_id = context.trace_id
        self.span_id = context.span_id
        self.trace_hex = f"{context.trace_id:032x}"
        self.flags = int(context.trace_flags)
        self.state = context.trace_state.to_header() if context.trace_state else ""


# The span running now in this task (the RPC's, a host call's, a stage's): the parent of the
# spans started under it, and the ids log lines carry. Its own variable, not OpenTelemetry's
# context (a Context copied on every attach), since only the host's code reads it.
current: ContextVar[HostSpan | UnsampledSpan | None] = ContextVar("ether_span", default=None)


class _OwnSpan(Span):
    """The fields both kinds of the host's spans carry (the trace context passed on).

    Slotted, as its subclasses are: two spans are made per traced call, and a slotted one is
    made in a little more than half the time of one with a ``__dict__`` (0.36 against 0.62 µs
    in-process); the API's ``Span`` has no slots of its own, so an instance still has an empty
    ``__dict__``: what is rarely set (a SpanContext made when asked, a span's events, links
    and status) has a default in the class and is set there, not made per span."""

    __slots__ = ("span_id", "state", "trace_hex", "trace_id")
    trace_id: int
    span_id: int
    trace_hex: str
    flags: int
    state: str
    is_remote = False
    _context: SpanContext | None = None

    def get_span_context(self) -> SpanContext:
        """The API's SpanContext, made when asked (a link, a foreign caller): not per span."""
        if self._context is None:
            self._context = SpanContext(
                self.trace_id,
                self.span_id,
                is_remote=False,
                trace_flags=TraceFlags(self.flags),
                trace_state=TraceState.from_header([self.state]) if self.state else None,
            )
        return self._context

    def traceparent(self) -> str:
        """The W3C ``traceparent`` of this span (what the API's propagator writes for it)."""
        return f"00-{self.trace_hex}-{self.span_id:016x}-{self.flags:02x}"


class UnsampledSpan(_OwnSpan):
    """A span the sampler dropped: its ids go on (children and agents follow the decision),
    nothing is recorded."""

    __slots__ = ()
    flags = 0

    def __init__(self, trace_id: int, trace_hex: str, state: str) -> None:
        self.trace_id = trace_id
        self.span_id = getrandbits(64) or 1
        self.trace_hex = trace_hex
        self.state = state

    def end(self, end_time: int | None = None) -> None:
        pass

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        pass

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        pass

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        pass

    def update_name(self, name: str) -> None:
        pass

    def is_recording(self) -> bool:
        return False

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        pass

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        pass


class HostSpan(_OwnSpan):
    """A recorded span: attributes, events and status kept as plain values until ``end``
    hands the span to ``sink`` as one Row. Attribute values are the host's own (str, bool,
    int, float); a None is dropped, as the SDK drops it."""

    __slots__ = ("_sink", "attributes", "kind", "name", "parent", "start")
    flags = _SAMPLED
    links: list[list[Any]] | None = None
    events: list[list[Any]] | None = None
    status_code = _UNSET
    status_description: str | None = None

    def __init__(
        self,
        sink: Sink,
        name: str,
        trace_id: int,
        trace_hex: str,
        state: str,
        parent: Parent | None,
        kind: int,
        attributes: dict[str, Any] | None,
        links: Sequence[Link] | None,
    ) -> None:
        self._sink: Sink | None = sink
        self.name = name
        self.trace_id = trace_id
        self.span_id = getrandbits(64) or 1
        self.trace_hex = trace_hex
        self.state = state
        self.parent = parent
        self.kind = kind
        self.attributes = attributes if attributes is not None else {}
        if links:
            self.links = [_link(link) for link in links]
        self.start = time.time_ns()

    def end(self, end_time: int | None = None) -> None:
        sink = self._sink
        if sink is None:  # ended already (the SDK warns and ignores it too)
            return
        self._sink = None
        parent = self.parent
        sink(
            (
                self.trace_hex,
                self.span_id,
                self.flags,
                self.state,
                0 if parent is None else parent.span_id,
                parent is not None and parent.is_remote,
                self.name,
                self.kind,
                self.start,
                end_time or time.time_ns(),
                self.attributes or None,
                self.status_code,
                self.status_description,
                self.events,
                self.links,
            )
        )

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        if self._sink is not None:
            for key, value in attributes.items():
                if value is not None:
                    self.attributes[key] = value

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if self._sink is not None and value is not None:
            self.attributes[key] = value

    def add_event(
        self,
        name: str,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
    ) -> None:
        if self._sink is None:
            return
        if self.events is None:
            self.events = []
        self.events.append([name, timestamp or time.time_ns(), dict(attributes or {}) or None])

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self._sink is not None and context.is_valid:
            if self.links is None:
                self.links = []
            self.links.append(_link(Link(context, attributes)))

    def update_name(self, name: str) -> None:
        if self._sink is not None:
            self.name = name

    def is_recording(self) -> bool:
        return self._sink is not None

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        """The SDK's rules: OK is final; a description only with ERROR."""
        if self._sink is None or self.status_code == _OK:
            return
        if isinstance(status, Status):
            code, description = status.status_code.value, status.description
        else:
            code = status.value
        self.status_code = code
        self.status_description = description if code == _ERROR else None

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """An ``exception`` event with OpenTelemetry's exception attributes (the host marks
        errors with fail() instead; this is here for the API's callers)."""
        self.add_event(
            "exception",
            {
                "exception.type": type(exception).__name__,
                "exception.message": str(exception),
                "exception.stacktrace": "".join(traceback.format_exception(exception)),
                "exception.escaped": str(escaped),
                **(attributes or {}),
            },
            timestamp,
        )


def _link(link: Link) -> list[Any]:
    context = link.context
    state = context.trace_state
    return [
        f"{context.trace_id:032x}",
        context.span_id,
        int(context.trace_flags),
        state.to_header() if state else "",
        context.is_remote,
        dict(link.attributes) if link.attributes else None,
    ]


class Tracer:
    """Starts the host's spans: sampled ones record into ``sink``; ``sample_ratio`` of the
    traces the host starts are sampled, a span with a parent follows the parent."""

    def __init__(self, sink: Sink, sample_ratio: float) -> None:
        self._sink = sink
        # TraceIdRatioBased's bound: a trace id whose low 64 bits are below it is sampled.
        self._bound = round(max(0.0, min(1.0, sample_ratio)) * (_MASK_64 + 1))
        self._every = self._bound > _MASK_64  # every trace sampled: no id to compare

    def start(
        self,
        name: str,
        parent: Parent | None,
        kind: int = _INTERNAL,
        attributes: dict[str, Any] | None = None,
        links: Sequence[Link] | None = None,
    ) -> HostSpan | UnsampledSpan:
        """A span under ``parent`` (None: the first of a new trace). ``attributes`` becomes
        the span's own: the caller hands over a dict it does not use again."""
        if parent is None:
            trace_id = getrandbits(128) or 1
            trace_hex = f"{trace_id:032x}"
            if self._every or (trace_id & _MASK_64) < self._bound:
                return HostSpan(
                    self._sink, name, trace_id, trace_hex, "", None, kind, attributes, links
                )
            return UnsampledSpan(trace_id, trace_hex, "")
        if parent.flags & _SAMPLED:
            return HostSpan(
                self._sink,
                name,
                parent.trace_id,
                parent.trace_hex,
                parent.state,
                parent,
                kind,
                attributes,
                links,
            )
        return UnsampledSpan(parent.trace_id, parent.trace_hex, parent.state)
