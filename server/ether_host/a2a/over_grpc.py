"""``lf.a2a.v1.A2AService`` on the host's gRPC port: a2a-sdk's GrpcHandler over our handler.

GrpcHandler (a2a-sdk) decodes each method, calls the RequestHandler and answers an A2A error
with its gRPC status and an ErrorInfo of domain ``a2a-protocol.org``, which a2a-sdk clients turn
back into the error's class. The methods are registered on the host's MethodTableServer like
the Ether services, so each call gets the same per-RPC log line, credentials and right
(rights.METHOD_RIGHTS) before it reaches A2A; this builder hands the caller and the call's time
left on to the handler, and checks the ``A2A-Version`` metadata.
"""

from __future__ import annotations

from typing import Any

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.grpc_handler import GrpcHandler, GrpcServerCallContextBuilder
from a2a.types import a2a_pb2, a2a_pb2_grpc
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER
from a2a.utils.errors import VersionNotSupportedError
from packaging.version import InvalidVersion, Version

from ether_host.a2a.handler import IDENTITY, TIME_LEFT, EtherRequestHandler
from ether_host.transport.convert import rpc_time_left
from ether_host.transport.interceptors import current_identity

SERVICE = a2a_pb2.DESCRIPTOR.services_by_name["A2AService"]
SERVICE_NAME = SERVICE.full_name  # lf.a2a.v1.A2AService


def supported(version: str) -> bool:
    """Whether this host speaks A2A ``version``: 1.x (the lf.a2a.v1 service)."""
    try:
        return Version(version).major == Version(PROTOCOL_VERSION_CURRENT).major
    except InvalidVersion:
        return False


def unsupported(version: str) -> VersionNotSupportedError:
    return VersionNotSupportedError(
        message=f"A2A version {version!r} is not supported: this host speaks A2A "
        f"{PROTOCOL_VERSION_CURRENT} (send the header {VERSION_HEADER}: {PROTOCOL_VERSION_CURRENT})"
    )


class _CallContext(GrpcServerCallContextBuilder):
    def build(self, context: grpc.aio.ServicerContext[Any, Any]) -> ServerCallContext:
        headers = {str(k): str(v) for k, v in context.invocation_metadata() or ()}
        # A call to lf.a2a.v1 without the header is a 1.x client: 0.3 clients call another
        # service (a2a.v1), which this host does not serve.
        version = headers.get(VERSION_HEADER.lower(), "")
        if version and not supported(version):
            raise unsupported(version)
        state: dict[str, object] = {"grpc_context": context, IDENTITY: current_identity.get()}
        time_left = rpc_time_left(context.time_remaining())
        if time_left is not None:
            state[TIME_LEFT] = time_left
        return ServerCallContext(state=state)


def add_to_server(handler: EtherRequestHandler, server: grpc.aio.Server) -> None:
    """Register A2AService on ``server`` (the host's MethodTableServer)."""
    servicer = GrpcHandler(handler, _CallContext())
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
