"""A real OTLP/gRPC trace receiver for tests and the benchmark: what a collector would get.

    with OtlpReceiver() as receiver:
        host = HostProcess(..., env={"ETHER_TELEMETRY_OTLP_ENDPOINT": receiver.endpoint})
        ...
        spans = receiver.wait_for(lambda spans: any(s.name == "x" for s in spans), timeout=30)

It serves opentelemetry-proto's TraceService on 127.0.0.1 (a free port) in a thread and keeps
every span exported to it, as ``ReceivedSpan`` (ids as lower-case hex, attributes as plain
Python values). ``wait_for`` wakes on each export (no polling) and fails after its budget.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver got it."""

    name: str
    trace_id: str  # 32 hex digits
    span_id: str  # 16 hex digits
    parent_span_id: str  # "" for a root span
    kind: int  # opentelemetry.proto.trace.v1.Span.SpanKind: 1 internal, 2 server, 3 client
    status_code: int  # 0 unset, 1 ok, 2 error
    status_message: str
    service: str  # the exporting process's service.name
    attributes: dict[str, Any] = field(default_factory=dict)
    events: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id) of each linked span
    start_ns: int = 0
    end_ns: int = 0


def _value(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _value(item.value) for item in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = []
        for resource_spans in request.resource_spans:
            resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            service = str(resource.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            kind=span.kind,
                            status_code=span.status.code,
                            status_message=span.status.message,
                            service=service,
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            events=tuple(event.name for event in span.events),
                            links=tuple(
                                (link.trace_id.hex(), link.span_id.hex()) for link in span.links
                            ),
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                        )
                    )
        self._receiver._add(received)
        return trace_service_pb2.ExportTraceServiceResponse()


class OtlpReceiver:
    """An OTLP/gRPC trace endpoint on a free loopback port; a context manager (start, stop).

    ``endpoint``: ``http://127.0.0.1:PORT`` (what ``[telemetry] otlp_endpoint`` takes);
    ``spans()``: every span received so far; ``wait_for(predicate, timeout)``: the spans once
    ``predicate(spans)`` holds, else AssertionError after ``timeout`` seconds;
    ``exports``: how many export requests came in. ``port``: a given one instead of a free one
    (a collector that comes up where a host already exports). ``tls``: a PEM private key and
    certificate chain; the receiver then serves TLS only, at ``https://127.0.0.1:PORT``.
    """

    def __init__(self, port: int = 0, *, tls: tuple[bytes, bytes] | None = None) -> None:
        self._spans: list[ReceivedSpan] = []
        self._changed = threading.Condition()
        self.exports = 0
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(self), self._server)
        if tls is None:
            port = self._server.add_insecure_port(f"127.0.0.1:{port}")
            self.endpoint = f"http://127.0.0.1:{port}"
        else:  # TLS only: a PEM key and certificate chain for 127.0.0.1
            credentials = grpc.ssl_server_credentials([tls])
            port = self._server.add_secure_port(f"127.0.0.1:{port}", credentials)
            self.endpoint = f"https://127.0.0.1:{port}"

    def __enter__(self) -> OtlpReceiver:
        self._server.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.stop(grace=None)

    def _add(self, spans: list[ReceivedSpan]) -> None:
        with self._changed:
            self._spans.extend(spans)
            self.exports += 1
            self._changed.notify_all()

    def spans(self) -> list[ReceivedSpan]:
        with self._changed:
            return list(self._spans)

    def wait_for(
        self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 30.0
    ) -> list[ReceivedSpan]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(list(self._spans)):
                left = deadline - time.monotonic()
                if left <= 0:
                    names = sorted({span.name for span in self._spans})
                    raise AssertionError(
                        f"the receiver did not get the expected spans within {timeout}s; "
                        f"{len(self._spans)} spans came in: {names}"
                    )
                self._changed.wait(left)
            return list(self._spans)
