"""The host's traces: the host's own tracer (spans.py: lighter than the OpenTelemetry SDK's,
behind the same API) and the few spans the rest of the host opens through it
(docs/telemetry.md, "Traces").

Off by default. When ``[telemetry] otlp_endpoint`` is unset nothing here exists: the parts of
the host hold ``tracing = None`` and pay one ``is None`` check on their hot path, no span
object. The tracer is the host's own, never OpenTelemetry's global provider, so a test or an
embedding program that sets its own global provider is not touched.

The W3C trace context travels in three places: gRPC metadata and HTTP headers in (a client's
``traceparent`` continues its trace), the ``task`` frame out to an agent (``traceparent``,
``tracestate``), and an agent's ``call`` frame back in (its own span, when it made one, parents
the host call).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ether_host import __version__
from ether_host.telemetry.spans import (
    HostSpan,
    Parent,
    RemoteParent,
    Tracer,
    UnsampledSpan,
    current,
)

if TYPE_CHECKING:  # made only when tracing is on (build_provider)
    from ether_host.telemetry.batches import SpanBatches

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
_PROPAGATOR = TraceContextTextMapPropagator()
_SERVER = SpanKind.SERVER.value
_INTERNAL = SpanKind.INTERNAL.value
_CARRIED = frozenset((TRACEPARENT, TRACESTATE))
# Payloads, when recorded (record_payloads), are cut to this many characters: a span attribute
# is not a place for a whole document.
MAX_PAYLOAD_CHARS = 4096


class TraceExport:
    """The host's tracer and where its ended spans go (batches to the relay child)."""

    def __init__(self, tracer: Tracer, batches: SpanBatches) -> None:
        self.tracer = tracer
        self.batches = batches

    def shutdown(self) -> None:
        self.batches.shutdown()


def build_provider(
    endpoint: str, *, service_name: str, sample_ratio: float, export_delay: float
) -> TraceExport:
    """A tracer that samples ``sample_ratio`` of the traces the host starts (and follows the
    caller's decision for the ones it continues) and exports in batches every
    ``export_delay`` seconds over OTLP/gRPC to ``endpoint``, through a relay child process
    (relay.py: the OTLP encoding is too costly to run beside the event loop; spans.py: so are
    the SDK's span objects)."""
    from opentelemetry.sdk.resources import Resource  # the SDK's resource detection, once

    from ether_host.telemetry.batches import SpanBatches
    from ether_host.telemetry.relay import RelayExporter

    relay = RelayExporter(endpoint, insecure=endpoint.startswith("http://"))
    resource = Resource.create({"service.name": service_name, "service.version": __version__})
    batches = SpanBatches(
        relay,
        [dict(resource.attributes), resource.schema_url],
        ["ether_host", __version__, None],
        delay=max(0.001, export_delay),
    )
    return TraceExport(Tracer(batches.add, sample_ratio), batches)


def _parent_in(carrier: Mapping[str, str]) -> RemoteParent | None:
    """The caller's span named by a W3C ``traceparent`` (and ``tracestate``), if valid."""
    found = trace.get_current_span(_PROPAGATOR.extract(carrier)).get_span_context()
    return RemoteParent(found) if found.is_valid else None


def carrier_of(pairs: Iterable[tuple[str, Any]]) -> dict[str, str]:
    """The W3C trace-context entries of gRPC metadata or HTTP headers (keys lower-case)."""
    carrier = {}
    for key, value in pairs:  # a loop, not a comprehension: half the cost, on every traced RPC
        if key in _CARRIED and isinstance(value, str):
            carrier[key] = value
    return carrier


def log_ids() -> dict[str, str] | None:
    """``trace_id`` and ``span_id`` of the span running now, or None outside a recorded span
    (an ended span, a span the sampler dropped, no span at all)."""
    span = current.get()
    if span is None or not span.is_recording():
        return None
    return {"trace_id": span.trace_hex, "span_id": f"{span.span_id:016x}"}


def trace_id_of(span: Span) -> str:
    if isinstance(span, HostSpan | UnsampledSpan):
        return span.trace_hex
    return f"{span.get_span_context().trace_id:032x}"


def _payload(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text[:MAX_PAYLOAD_CHARS]


def _own(span: Span | None) -> HostSpan | UnsampledSpan | None:
    """``span`` as a parent: one of the host's own spans (every span Tracing makes is)."""
    return span if isinstance(span, HostSpan | UnsampledSpan) else None


class Tracing:
    """The host's tracer and the spans it opens; built once by the composition root."""

    def __init__(self, provider: TraceExport, *, record_payloads: bool = False) -> None:
        self.provider = provider
        self.record_payloads = record_payloads
        self.tracer = provider.tracer

    def shutdown(self) -> None:
        """Export what is left and stop the exporter (at the host's stop)."""
        self.provider.shutdown()

    # -- spans anywhere -------------------------------------------------------------------

    @contextmanager
    def span(
        self,
        name: str,
        attributes: Mapping[str, Any] | None = None,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
        parent: Parent | None = None,
        links: list[Link] | None = None,
    ) -> Iterator[Span]:
        """A span current for the block (under ``parent``, else under the current one); an
        exception leaving the block marks it ERROR with the exception's text."""
        span = self.tracer.start(
            name,
            parent if parent is not None else current.get(),
            kind.value,
            dict(attributes) if attributes else None,
            links,
        )
        token = current.set(span)
        try:
            yield span
        except BaseException as error:
            fail(span, error)
            raise
        finally:
            current.reset(token)
            span.end()

    @staticmethod
    def links_to_current() -> list[Link]:
        """A link to the span running now (the RPC that starts work outliving it), if any."""
        span = current.get()
        return [] if span is None else [Link(span.get_span_context())]

    def payload(self, span: Span, key: str, value: Any) -> None:
        """Record params or data on ``span``, only when record_payloads says so."""
        if self.record_payloads and span.is_recording():
            span.set_attribute(key, _payload(value))

    def child_span(self, name: str, parent: Span, **attributes: Any) -> Span:
        """A span under ``parent``, started now and not made current (the caller ends it)."""
        return self.tracer.start(name, _own(parent), attributes=attributes or None)

    # -- RPCs and HTTP requests ------------------------------------------------------------

    def start_server_span(
        self, name: str, carrier: Mapping[str, str], attributes: Mapping[str, Any]
    ) -> tuple[Span, object]:
        """A SERVER span made current (continuing the caller's trace when ``carrier`` holds a
        valid ``traceparent``) and the token that ends its being current (end_server_span)."""
        # Always a trace of its own without a traceparent, whatever span the task serving the
        # call happens to carry.
        parent = _parent_in(carrier) if carrier else None
        span = self.tracer.start(name, parent, _SERVER, dict(attributes))
        return span, current.set(span)

    @staticmethod
    def end_server_span(span: Span, token: object, error: str | None = None) -> None:
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        current.reset(token)  # type: ignore[arg-type] # the token start_server_span gave
        span.end()

    # -- tasks -----------------------------------------------------------------------------

    def start_task(
        self,
        task_id: str,
        agent: str,
        action: str,
        params: Any,
        *,
        traceparent: str = "",
        tracestate: str = "",
        run_id: str = "",
        remote: bool = False,
    ) -> Span:
        """The span of one task, under the current span (the RPC's, the host call's), else
        under the span ``traceparent`` names (the caller's on another host); not made current:
        the task's host calls find it on the running task. ``run_id``: the workflow run it
        belongs to; ``remote``: the caller's side of a task another host runs."""
        parent: Parent | None = current.get()
        if parent is None and traceparent:  # a task sent by another host of the cluster
            carrier = {TRACEPARENT: traceparent}
            if tracestate:
                carrier[TRACESTATE] = tracestate
            parent = _parent_in(carrier)
        # One dict literal, not stores into the span's: this runs for every task, and on a
        # busy host each step of it costs several times what a micro-benchmark shows.
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent,
            "ether.action": action,
            "ether.task_id": task_id,
        }
        if run_id:
            attributes["ether.run_id"] = run_id
        if remote:
            attributes["ether.remote"] = True
        if self.record_payloads:
            attributes["ether.params"] = _payload(params)
        return self.tracer.start(
            f"ether.task {agent}.{action}" if action else f"ether.task {agent}",
            parent,
            _INTERNAL,
            attributes,
        )

    @staticmethod
    def inject_task(span: Span, frame: dict[str, Any]) -> str:
        """``inject`` for a task frame the host sends (``span`` is the task's: the host's own),
        and the span's trace id, for the agent's log lines."""
        if type(span) is HostSpan or type(span) is UnsampledSpan:
            # The flags written out, not formatted: a HostSpan is sampled, an UnsampledSpan not.
            flags = "01" if type(span) is HostSpan else "00"
            frame[TRACEPARENT] = f"00-{span.trace_hex}-{span.span_id:016x}-{flags}"
            if span.state:
                frame[TRACESTATE] = span.state
            return span.trace_hex
        Tracing.inject(span, frame)
        return trace_id_of(span)

    @staticmethod
    def inject(span: Span, frame: dict[str, Any]) -> None:
        """Add ``span``'s W3C context to an outgoing frame (``traceparent``, ``tracestate``)."""
        own = _own(span)
        if own is None:
            _PROPAGATOR.inject(frame, context=trace.set_span_in_context(span))
            return
        frame[TRACEPARENT] = own.traceparent()
        if own.state:
            frame[TRACESTATE] = own.state

    @staticmethod
    def parent_of(frame: Mapping[str, Any], fallback: Span | None) -> Parent | None:
        """The parent of a host call's span: the agent's own span when its ``call`` frame
        names one (a valid ``traceparent``), else ``fallback`` (the calling task's span)."""
        traceparent = frame.get(TRACEPARENT)
        if isinstance(traceparent, str):
            carrier = {TRACEPARENT: traceparent}
            tracestate = frame.get(TRACESTATE)
            if isinstance(tracestate, str):
                carrier[TRACESTATE] = tracestate
            found = _parent_in(carrier)
            if found is not None:
                return found
        return _own(fallback)

    def end_task(self, span: Span, result: Any, error: BaseException | None) -> None:
        """End a task's span: ERROR with the task's error code (a TaskResult with status
        ERROR) or the host's error, else OK."""
        if type(span) is not HostSpan or not span.is_recording():
            return
        if error is not None:
            fail(span, error)
        elif result is not None:
            attributes = span.attributes  # every value here is set (an int, a status name)
            attributes["ether.status"] = result.status
            attributes["ether.pid"] = result.metadata.pid
            attributes["ether.attempt"] = result.metadata.attempt
            if result.error is not None:
                span.set_attribute("error.type", result.error.code)
                span.set_status(
                    Status(StatusCode.ERROR, f"{result.error.code}: {result.error.message}")
                )
            else:
                self.payload(span, "ether.data", result.data)
        span.end()


@contextmanager
def optional_span(
    tracing: Tracing | None,
    name: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    links: list[Link] | None = None,
) -> Iterator[Span | None]:
    """``tracing.span(...)``, or nothing (None) when tracing is off: for spans off the hot path
    (workflow runs and stages, gateway turns, terminal waits)."""
    if tracing is None:
        yield None
        return
    with tracing.span(name, attributes, links=links) as span:
        yield span


def fail(span: Span, error: BaseException) -> None:
    """Mark ``span`` ERROR with what went wrong: a domain error's status and reason, else the
    exception's type."""
    code = getattr(error, "code", None)
    reason = getattr(error, "reason", None)
    name = getattr(code, "value", code) if code else type(error).__name__
    span.set_attribute("error.type", str(name))
    if reason:
        span.set_attribute("ether.reason", str(getattr(reason, "value", reason)))
    message = getattr(error, "message", None) or str(error)
    span.set_status(Status(StatusCode.ERROR, f"{name}: {message}"))


def set_error(span: Span, message: str) -> None:
    """Mark ``span`` ERROR: what it stands for ended badly (a run FAILED, a stage CANCELLED)."""
    span.set_status(Status(StatusCode.ERROR, message))


def annotate(attributes: Mapping[str, Any]) -> None:
    """Add ``attributes`` to the span running now, when one is recorded (a host call's: what
    the handler learnt, such as a fetch's answer); nothing otherwise."""
    span = current.get()
    if span is not None:
        span.set_attributes(attributes)
