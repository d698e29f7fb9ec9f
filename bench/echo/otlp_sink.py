"""An OTLP/gRPC trace receiver that only counts spans: bench/telemetry.py's collector.

    python -m bench.echo.otlp_sink

Prints ``{"port": N}`` once it listens on 127.0.0.1; each line ``count`` on stdin is answered
with ``{"spans": N}``, the spans received so far. It runs in a process of its own so the host
under measurement pays for exporting, as it would to a real collector, and not for decoding.

A real collector runs on another machine; this one shares the two cores with the hosts it
measures. So it keeps each export request's bytes as they came (a method with no request
deserializer) and decodes them only when asked to count, between measurements: during a
round it costs what a gRPC server takes to accept a request, not the ~3 µs per span that
decoding took here (bench/RESULTS.md, "Telemetry: where full tracing's cost goes").
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

ANSWER = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()


class KeepingTraceService:
    """TraceService/Export keeping the requests' bytes; ``count`` decodes what came since."""

    def __init__(self) -> None:
        self.spans = 0
        self._kept: list[bytes] = []
        self._lock = threading.Lock()

    def export(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self._kept.append(request)
        return ANSWER

    def count(self) -> int:
        with self._lock:
            kept, self._kept = self._kept, []
        for raw in kept:
            request = trace_service_pb2.ExportTraceServiceRequest.FromString(raw)
            self.spans += sum(
                len(scope.spans)
                for resource in request.resource_spans
                for scope in resource.scope_spans
            )
        return self.spans

    def handler(self) -> grpc.GenericRpcHandler:
        """Export with no (de)serializers: the bytes as they came in, the answer as bytes."""
        method: grpc.RpcMethodHandler[bytes, bytes] = grpc.unary_unary_rpc_method_handler(
            self.export
        )
        return grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService", {"Export": method}
        )


def main() -> None:
    service = KeepingTraceService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((service.handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"port": port}), flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            print(json.dumps({"spans": service.count()}), flush=True)
    server.stop(grace=None)


if __name__ == "__main__":
    main()
