"""An OTLP/gRPC trace receiver that only counts spans: bench/telemetry.py's collector.

    python -m bench.echo.otlp_sink

Prints ``{"port": N}`` once it listens on 127.0.0.1; each line ``count`` on stdin is answered
with ``{"spans": N}``, the spans received so far. It runs in a process of its own so the host
under measurement pays for exporting, as it would to a real collector, and not for decoding.
"""

from __future__ import annotations

import json
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class CountingTraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0
        self._lock = threading.Lock()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        received = sum(
            len(scope.spans)
            for resource in request.resource_spans
            for scope in resource.scope_spans
        )
        with self._lock:
            self.spans += received
        return trace_service_pb2.ExportTraceServiceResponse()


def main() -> None:
    service = CountingTraceService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    # opentelemetry-proto ships its gRPC stubs without types.
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(service, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(json.dumps({"port": port}), flush=True)
    for line in sys.stdin:
        if line.strip() == "count":
            print(json.dumps({"spans": service.spans}), flush=True)
    server.stop(grace=None)


if __name__ == "__main__":
    main()
