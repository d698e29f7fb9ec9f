"""The web console's bridge for client and bidi streams (Attach, Converse, Pipe): a WebSocket at
``/rpc-ws/<service>/<method>`` carrying the method's own proto messages, one per frame, run
through the gRPC server's method handler as transport/console_call.py describes.

Browsers' fetch cannot stream a request body, so Connect from a browser has no client or bidi
streams; a WebSocket can. The protocol (docs/console.md, "The bridge"):

1. The browser opens the socket on the same origin as the page (any other ``Origin`` is
   refused before the upgrade: a page elsewhere must not type into a terminal on loopback).
2. Its first frame is text, JSON ``{"metadata": {"authorization": "Bearer TOKEN"}}``: the call's
   metadata, since a browser cannot set headers on a WebSocket. The method's decorators check
   it as they check gRPC metadata (the same token, right and log line).
3. Then binary frames, each one request message; a text frame ``{"end": true}`` half-closes.
4. The host sends binary frames, each one response message, then one text frame with the
   status in Connect's end-of-stream form, ``{}`` for OK or ``{"error": {"code":
   "permission_denied", "message": ..., "details": [{"type": ..., "value": base64}]}}``, and
   closes. A browser that closes the socket cancels the call.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import orjson
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from ether_host.errors import InvalidArgument, Unavailable
from ether_host.reasons import Reason
from ether_host.transport.console_call import (
    BrowserCall,
    CallAborted,
    MethodHandler,
    details_of,
    metadata_of,
    peer_of,
)
from ether_host.transport.console_rpc import SERVED_PREFIXES, connect_error, crashed
from ether_host.transport.status import status_of

WS_PATH = "/rpc-ws"
# A WebSocket close code for a refused origin (RFC 6455 7.4.1: policy violation).
POLICY_VIOLATION = 1008


def console_ws_route(
    handlers: Mapping[str, MethodHandler], stopping: Callable[[], bool] = lambda: False
) -> WebSocketRoute:
    """The bridge's route, serving the request-streaming methods of ``handlers``. Once
    ``stopping()`` says the host stops, a new call ends at once UNAVAILABLE (HOST_STOPPING), as a
    new request does on the rest of the listener (HttpGuard, which passes WebSockets through)
    and a new call on the draining gRPC port: the bridge calls the handlers in process, past
    the gRPC server's own refusal."""

    async def endpoint(websocket: WebSocket) -> None:
        method = "/" + websocket.path_params["method"]
        handler = handlers.get(method)
        if not _same_origin(websocket):
            await websocket.close(POLICY_VIOLATION, "the console's bridge takes same-origin pages")
            return
        await websocket.accept()
        if handler is None or not method.startswith(SERVED_PREFIXES):
            await _end(websocket, "unimplemented", f"no method {method} on this host")
            return
        if not handler.request_streaming:
            await _end(websocket, "unimplemented", f"{method} takes one request: call it at /rpc")
            return
        if stopping():
            await _end_with(websocket, _host_stopping())
            return
        await _serve(websocket, method, handler)

    return WebSocketRoute(WS_PATH + "/{method:path}", endpoint)


def _same_origin(websocket: WebSocket) -> bool:
    """A browser sends the page's Origin: it must name this host (what the page was served
    from). A client without one (not a browser) is let in, as on the gRPC port."""
    origin = websocket.headers.get("origin")
    if origin is None:
        return True
    host = websocket.headers.get("host", "")
    return urlsplit(origin).netloc == host


async def _serve(websocket: WebSocket, method: str, handler: MethodHandler) -> None:
    try:
        first = orjson.loads(await websocket.receive_text())
        metadata = first.get("metadata", {}) if isinstance(first, dict) else None
        if not isinstance(metadata, dict):
            raise ValueError("metadata is not an object")
    except (ValueError, KeyError, TypeError) as error:
        await _end(
            websocket,
            "invalid_argument",
            'the first frame must be JSON text {"metadata": {...}}' + f" ({error})",
        )
        return
    except WebSocketDisconnect:
        return
    headers = [(str(k), str(v)) for k, v in metadata.items()]
    client = websocket.client
    peer = peer_of((client.host, client.port) if client else None)
    call = BrowserCall(
        metadata_of(headers), peer, None, websocket.send_bytes, handler.response_serializer
    )
    gone = asyncio.Event()
    requests = _requests(websocket, handler, gone)

    async def run() -> None:
        if handler.stream_stream is not None:
            await handler.stream_stream(requests, cast(Any, call))
        else:
            response = await handler.stream_unary(requests, cast(Any, call))
            await websocket.send_bytes(handler.response_serializer(response))

    task = asyncio.create_task(run())
    watcher = asyncio.create_task(gone.wait())
    try:
        await asyncio.wait([task, watcher], return_when=asyncio.FIRST_COMPLETED)
        if gone.is_set() and not task.done():
            # The browser closed the socket: the call is cancelled, as a gRPC client's cancel
            # cancels the call's task (the servicer's readers and writers end with it).
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    except CallAborted as aborted:
        await _end_with(websocket, aborted)
        return
    except Exception as error:  # never expected: the logging decorator maps every error
        failed = crashed(method, error)
        await _end(websocket, failed.code.value, failed.message)
        return
    finally:
        watcher.cancel()
        task.cancel()
    if not gone.is_set():
        await _end(websocket, None, "")


async def _requests(
    websocket: WebSocket, handler: MethodHandler, gone: asyncio.Event
) -> AsyncIterator[Any]:
    decode = handler.request_deserializer
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            gone.set()
            await asyncio.Event().wait()  # cancelled with the call, which gone ends
        data = message.get("bytes")
        if data is not None:
            yield decode(data)
            continue
        text = message.get("text") or ""
        with contextlib.suppress(ValueError):
            if orjson.loads(text) == {"end": True}:
                return
        raise InvalidArgument(
            'a text frame after the first must be {"end": true}; requests are binary frames',
            reason=Reason.MALFORMED_REQUEST,
        )


def _host_stopping() -> CallAborted:
    status = status_of(
        Unavailable(
            "the host is stopping: it takes no new calls; retry on another host or once it has "
            "restarted",
            reason=Reason.HOST_STOPPING,
            retry_after=1.0,
        )
    )
    return CallAborted(status.code, status.details, details_of(status.trailing_metadata))


async def _end_with(websocket: WebSocket, aborted: CallAborted) -> None:
    error = connect_error(aborted)
    details = [
        {"type": d.type_name, "value": base64.b64encode(d.message_bytes).decode()}
        for d in error.details
    ]
    await _end(websocket, error.code.value, error.message, details)


async def _end(
    websocket: WebSocket, code: str | None, message: str, details: list[Any] | None = None
) -> None:
    body: dict[str, Any] = {}
    if code is not None:
        body["error"] = {"code": code, "message": message, "details": details or []}
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.send_text(orjson.dumps(body).decode())
        await websocket.close()
