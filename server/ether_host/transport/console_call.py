"""One RPC of the web console, run through the gRPC listener's own method handler.

The console does not get a second API: its calls (transport/console_rpc.py over the Connect
protocol, transport/console_ws.py over a WebSocket) look up the method handler the gRPC server
serves (``MethodTableServer.handlers()``: the servicer behind the same decorators, so the same
authentication, rights, request checks, stream quotas, logging, metrics and tracing) and run
its behaviour with a ``BrowserCall`` in place of grpc.aio's servicer context. ``BrowserCall``
implements the part of that context the decorators and servicers use (metadata, peer,
deadline, status, abort, write); an abort raises ``CallAborted``, which the front answers in
its own protocol with the same code, message and google.rpc details a gRPC caller gets.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NoReturn

import grpc
from google.rpc import status_pb2

# Metadata a browser cannot mean for the RPC (the HTTP exchange's own headers); the rest are
# passed on as gRPC metadata, as a gRPC-Web or Connect proxy would.
_HTTP_ONLY = frozenset(
    {"host", "connection", "content-length", "content-type", "accept", "accept-encoding",
     "user-agent", "origin", "referer", "cookie", "connect-protocol-version",
     "connect-timeout-ms", "sec-websocket-key", "sec-websocket-version",
     "sec-websocket-extensions", "upgrade"}
)  # fmt: skip
DETAILS_KEY = "grpc-status-details-bin"
# A grpc.RpcMethodHandler of the gRPC server's table. Typed loosely: grpc's stubs type its
# behaviours as synchronous functions, and grpc.aio's are coroutine functions.
MethodHandler = Any


class CallAborted(grpc.aio.AbortError):
    """The call ended with a status (the servicer's abort or a decorator's mapped error).

    A subclass of grpc's own AbortError so the logging decorator treats it as grpc.aio's
    abort: a status the call chose, logged with its code, never a crash."""

    def __init__(self, code: grpc.StatusCode, message: str, details: Sequence[Any]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = list(details)  # google.protobuf Any messages (google.rpc details)


def metadata_of(headers: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The gRPC metadata an HTTP request carries (lower-case names, HTTP-only headers left out)."""
    return tuple((k.lower(), v) for k, v in headers if k.lower() not in _HTTP_ONLY)


def peer_of(client: tuple[str, int] | None) -> str:
    """The client's address as grpc writes a peer (the log line's ``peer``)."""
    if not client:
        return "unknown"
    host, port = client
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class BrowserCall:
    """What a servicer and the decorators see of a console call (grpc.aio.ServicerContext's
    methods they use). ``write`` sends one response message (already serialized by the
    handler's serializer) to the browser; ``deadline`` is a ``time.monotonic()`` instant."""

    def __init__(
        self,
        metadata: tuple[tuple[str, str], ...],
        peer: str,
        deadline: float | None,
        write: Callable[[bytes], Awaitable[None]] | None,
        serialize: Callable[[Any], bytes],
    ) -> None:
        self._metadata = metadata
        self._peer = peer
        self._deadline = deadline
        self._write = write
        self._serialize = serialize
        self._code: grpc.StatusCode | None = None
        self._details: str | None = None

    # -- what the call is -------------------------------------------------------------------
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}  # no TLS client certificate reaches the console's calls

    # -- how it ends ------------------------------------------------------------------------
    def code(self) -> grpc.StatusCode | None:
        return self._code

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def details(self) -> str | None:
        return self._details

    def set_details(self, details: str) -> None:
        self._details = details

    async def abort(
        self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()
    ) -> NoReturn:
        self._code, self._details = code, details
        raise CallAborted(code, details, details_of(trailing_metadata))

    async def abort_with_status(self, status: grpc.Status) -> NoReturn:
        await self.abort(status.code, status.details, status.trailing_metadata)

    def set_trailing_metadata(self, trailing_metadata: Any) -> None:
        pass  # the console's fronts carry the status and its details, nothing else

    async def send_initial_metadata(self, initial_metadata: Any) -> None:
        pass

    def disable_next_message_compression(self) -> None:
        pass

    # -- responses --------------------------------------------------------------------------
    async def write(self, message: Any) -> None:
        assert self._write is not None, "write on a call with one response"
        await self._write(self._serialize(message))


def details_of(trailing_metadata: Any) -> list[Any]:
    """The google.rpc details of a status, from the trailing metadata status_of() builds."""
    for key, value in trailing_metadata or ():
        if key == DETAILS_KEY and isinstance(value, bytes):
            return list(status_pb2.Status.FromString(value).details)
    return []
