"""Servicers for RPCs whose feature has not landed: UNIMPLEMENTED, never a fake success."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor


def pending_servicer(base: type, service: ServiceDescriptor, missing: str) -> Any:
    """Subclass ``base`` so every RPC answers UNIMPLEMENTED.

    ``missing`` names what is not built yet, so a caller knows it is a gap and
    not a bug in their request.
    """
    namespace: dict[str, Any] = {}
    for method in service.methods:
        message = f"{service.name}.{method.name} is not implemented yet: {missing}"

        async def answer(
            self: Any, request: Any, context: grpc.aio.ServicerContext, _msg: str = message
        ) -> None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, _msg)

        namespace[method.name] = answer
    return type(f"Pending{service.name}", (base,), namespace)()
