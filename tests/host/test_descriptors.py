"""Every RPC of every ether.v1 service is served: called with an empty request it answers
with a status of its own servicer — never grpc's unknown-method answer, never the generated
base class's "Method not implemented!", never a crash (UNKNOWN, INTERNAL). UNIMPLEMENTED is
allowed only with our message naming the issue that will land the feature."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import MethodDescriptor

from tests.support.host import HostProcess

from ._support import ETHER_SERVICES, service_descriptors

METHODS = [
    (service.full_name, method)
    for service in service_descriptors().values()
    for method in service.methods
]
# A follow-stream with nothing to send (WatchEvents on an empty host) is healthy: it waits.
STREAM_DEADLINE = 1.0
UNARY_DEADLINE = 10.0


def test_every_service_is_walked() -> None:
    assert {name for name, _ in METHODS} == set(ETHER_SERVICES)


def _call(
    channel: grpc.Channel, service: str, method: MethodDescriptor
) -> tuple[grpc.StatusCode, str]:
    """Call ``method`` with an empty request; the status it ends with (OK after one response
    of a stream)."""
    request_type = message_factory.GetMessageClass(method.input_type)
    response_type = message_factory.GetMessageClass(method.output_type)
    path = f"/{service}/{method.name}"
    kinds: dict[tuple[bool, bool], Callable[..., Any]] = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }
    make = kinds[(method.client_streaming, method.server_streaming)]
    stub = make(
        path,
        request_serializer=request_type.SerializeToString,
        response_deserializer=response_type.FromString,
    )

    def one_request() -> Iterator[Any]:
        yield request_type()

    request: Any = one_request() if method.client_streaming else request_type()
    try:
        if method.server_streaming:
            call = stub(request, timeout=STREAM_DEADLINE)
            try:
                next(call)
            except StopIteration:
                pass
            finally:
                call.cancel()
        else:
            stub(request, timeout=UNARY_DEADLINE)
    except grpc.RpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


@pytest.mark.parametrize(
    ("service", "method"), METHODS, ids=[f"{s.rpartition('.')[2]}.{m.name}" for s, m in METHODS]
)
def test_rpc_is_served(host: HostProcess, service: str, method: MethodDescriptor) -> None:
    code, message = _call(host.channel, service, method)
    assert code not in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL), (
        f"{code.name}: {message}"
    )
    if code == grpc.StatusCode.UNIMPLEMENTED:
        assert "Method not found" not in message and "Method not implemented" not in message, (
            message
        )
        assert method.name in message and "issue #" in message, (
            f"UNIMPLEMENTED without naming what is missing: {message}"
        )
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        assert method.server_streaming, f"a unary answer took over {UNARY_DEADLINE}s"
