"""The Connect protocol on the HTTP listener (``/rpc``): the web console's unary and
server-streaming calls to the five Ether services, through the gRPC server's own method
handlers (transport/console_call.py says how).

Why connect-python (``connectrpc``) and not sonora: the browser side is ``@connectrpc/connect-web``
with the protobuf-es stubs clients/typescript already generates, and Connect is its native
protocol (server streams over HTTP/1.1 fetch, errors as JSON with google.rpc details); the
package is the Connect project's own, conformance-tested and released in 2026. sonora (gRPC-Web)
was last released in 2023 and pins urllib3 < 2 against the lock's 2.8. Neither would reuse the
servicers' decorators on its own (both call a servicer with a context of their own), so the
endpoints here run the already-decorated handlers: connect-python does the protocol (framing,
content types, timeouts, end-of-stream errors), the handler does everything else.

Bytes in, bytes out: the codec is a pass-through, and each request is decoded by the handler's
own deserializer, which carries the host's request checks (transport/validation.py), as on the
gRPC port. The binary protobuf codec only (the console sends ``application/proto``); a JSON
request is refused 415. Client and bidi streams cannot ride fetch: transport/console_ws.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

import grpc
import structlog
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.method import IdempotencyLevel, MethodInfo, StreamType
from connectrpc.request import RequestContext
from connectrpc.server import ConnectASGIApplication, Endpoint
from protobuf.wkt import Any as WireAny

from ether_host.transport.console_call import BrowserCall, CallAborted, MethodHandler, metadata_of

log = structlog.get_logger("ether.console")

RPC_PATH = "/rpc"
# The services the console calls (and health, which browsers may probe like any client).
SERVED_PREFIXES = ("/ether.v1.", "/grpc.health.v1.")
_END = object()


class _PassThrough:
    """The ``proto`` codec as bytes: the method handler (de)serializes."""

    def name(self) -> str:
        return "proto"

    def encode(self, message: bytes) -> bytes:
        return message

    def decode(self, data: bytes | bytearray, message_class: type[Any]) -> bytes:
        return bytes(data)


class ConsoleRpc(ConnectASGIApplication[Mapping[str, MethodHandler]]):
    """The ASGI app answering Connect calls to every unary and server-streaming method of
    ``handlers`` (the gRPC server's decorated method table) under SERVED_PREFIXES."""

    def __init__(self, handlers: Mapping[str, MethodHandler]) -> None:
        super().__init__(
            service=handlers,
            endpoints=_endpoints,
            codecs=[cast(Any, _PassThrough())],
            compressions=[],
        )

    @property
    def path(self) -> str:
        return RPC_PATH


def _endpoints(handlers: Mapping[str, MethodHandler]) -> dict[str, Any]:
    endpoints: dict[str, Any] = {}
    for method, handler in handlers.items():
        if not method.startswith(SERVED_PREFIXES) or handler.request_streaming:
            continue
        service, name = method[1:].rsplit("/", 1)
        streaming = handler.response_streaming
        info = MethodInfo(
            name=name,
            service_name=service,
            input=bytes,
            output=bytes,
            idempotency_level=IdempotencyLevel.UNKNOWN,
            stream_type=StreamType.SERVER_STREAM if streaming else StreamType.UNARY,
        )
        if streaming:
            endpoints[method] = Endpoint.server_stream(info, _server_stream(method, handler))
        else:
            endpoints[method] = Endpoint.unary(info, _unary(method, handler))
    return endpoints


def _call(ctx: RequestContext[Any, Any], handler: MethodHandler, write: Any = None) -> BrowserCall:
    headers = [(k, v) for k, v in ctx.request_headers.allitems()]
    timeout_ms = ctx.timeout_ms
    deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    client = ctx.client_address
    peer = "unknown" if client is None else _peer(client)
    return BrowserCall(metadata_of(headers), peer, deadline, write, handler.response_serializer)


def _peer(address: str) -> str:
    host, _, port = address.rpartition(":")
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


def connect_error(aborted: CallAborted) -> ConnectError:
    """The Connect error of a call's status: same code, message and google.rpc details."""
    code = Code.CANCELED if aborted.code is grpc.StatusCode.CANCELLED else Code[aborted.code.name]
    details = [ErrorDetail(WireAny(type_url=d.type_url, value=d.value)) for d in aborted.details]
    return ConnectError(code, aborted.message, details)


def crashed(method: str, error: Exception) -> ConnectError:
    """INTERNAL with a correlation id (the error logged under it), never the exception's text:
    what the gRPC port answers for a fault of the host's own."""
    correlation_id = uuid.uuid4().hex[:12]
    log.error("console call crashed", method=method, correlation_id=correlation_id, exc_info=error)
    return ConnectError(
        Code.INTERNAL,
        f"internal error; the host log has the details under correlation id {correlation_id}",
    )


def _unary(method: str, handler: MethodHandler) -> Any:
    behavior = handler.unary_unary

    async def call(request: bytes, ctx: RequestContext[Any, Any]) -> bytes:
        browser = _call(ctx, handler)
        try:
            response = await behavior(handler.request_deserializer(request), cast(Any, browser))
        except CallAborted as aborted:
            raise connect_error(aborted) from None
        except Exception as error:  # never expected: the logging decorator maps every error
            raise crashed(method, error) from None
        serialized: bytes = handler.response_serializer(response)
        return serialized

    return call


def _server_stream(method: str, handler: MethodHandler) -> Any:
    behavior = handler.unary_stream

    async def call(request: bytes, ctx: RequestContext[Any, Any]) -> AsyncIterator[bytes]:
        # The behaviour writes (context.write); the generator hands each write to connect-python.
        # One message in hand at a time: a slow browser slows the servicer, as on gRPC.
        outbox: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)
        browser = _call(ctx, handler, outbox.put)
        decoded = handler.request_deserializer(request)

        async def run() -> None:
            try:
                await behavior(decoded, cast(Any, browser))
            except CallAborted as aborted:
                await outbox.put(aborted)
                return
            except Exception as error:  # never expected, as above; the stream must still end
                await outbox.put(crashed(method, error))
                return
            await outbox.put(_END)

        task = asyncio.create_task(run())
        try:
            while True:
                item = await outbox.get()
                if item is _END:
                    break
                if isinstance(item, CallAborted):
                    raise connect_error(item) from None
                if isinstance(item, ConnectError):
                    raise item
                yield item
            await task
        finally:
            # The browser went away or the stream ended: the servicer's task ends with it (as
            # a gRPC cancel ends the call's task).
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    return call
