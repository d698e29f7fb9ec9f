"""What wraps every HTTP request: the per-request log line, authentication and rights.

The HTTP twin of transport/rpc_logging.py (RpcLogging) and transport/interceptors.py
(Authenticate), written as one pure ASGI middleware so that it also wraps streamed responses
(MCP's server-sent events) without buffering them. The policy is the host's, not a copy: identities from auth.py's token table
(``bearer_identity``, the rule gRPC metadata goes through), the right each route needs from
rights.py's HTTP_RIGHTS, refusals as the core's errors.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, MutableMapping
from typing import Any

import orjson
import structlog
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ether_host import rights
from ether_host.auth import LOCAL, Identity, TokenTable, bearer_identity
from ether_host.errors import EtherError, Unauthenticated, Unavailable
from ether_host.logs import bind_call, log_later
from ether_host.reasons import Reason
from ether_host.telemetry import Tracing, carrier_of

log = structlog.get_logger("ether.rpc")

IDENTITY_KEY = "ether.identity"  # where the caller's Identity sits in the ASGI scope

# An Ether error code (the gRPC status names) -> the HTTP status that says the same thing, as
# google.rpc's code.proto maps them.
HTTP_STATUS = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "ALREADY_EXISTS": 409,
    "ABORTED": 409,
    "RESOURCE_EXHAUSTED": 429,
    "CANCELLED": 499,
    "UNIMPLEMENTED": 501,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
    "INTERNAL": 500,
}
# The other way, for the log line's ``code``: one vocabulary for both listeners.
CODE_OF_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    406: "INVALID_ARGUMENT",
    409: "ALREADY_EXISTS",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def request_identity(scope: Scope) -> Identity:
    """The caller of an HTTP request, as the guard named it (``local`` when auth is off)."""
    identity = scope.get(IDENTITY_KEY, LOCAL)
    assert isinstance(identity, Identity)
    return identity


def code_of(status: int) -> str:
    """The Ether code an HTTP status answers (the log line's ``code``)."""
    if status < 400:
        return "OK"
    return CODE_OF_STATUS.get(status, "INTERNAL" if status >= 500 else "UNKNOWN")


def error_body(error: EtherError) -> tuple[int, bytes]:
    """The HTTP status and JSON body of a refused request: the code, reason and message a gRPC
    caller gets in its status and ErrorInfo."""
    body = {
        "error": {
            "code": error.code.value,
            "reason": str(error.reason),
            "message": error.message,
            "metadata": error.metadata,
        }
    }
    return HTTP_STATUS.get(error.code.value, 500), orjson.dumps(body)


async def send_error(send: Send, error: EtherError) -> None:
    status, body = error_body(error)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="ether"'))
    if error.retry_after is not None:  # RFC 9110: whole seconds, as gRPC's RetryInfo says
        headers.append((b"retry-after", b"%d" % math.ceil(error.retry_after)))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class HttpGuard:
    """Logs one line per request (event ``rpc``, as every gRPC call: ``method``, ``peer``,
    ``code``, ``duration_ms``, plus ``http_status``), names the caller and refuses a request
    whose route's right the caller lacks: 401 without a valid token, 403 naming the right.
    Checked before the route runs, so a refused request starts nothing.

    ``tokens`` is None when auth is off: every caller is ``local`` with every right. Once
    ``stopping()`` says the host stops, a new request is 503 (UNAVAILABLE, HOST_STOPPING) but on
    the ``probes`` paths: the listener stays up while the host drains (main.py), so a load
    balancer reads "not ready" there rather than a refused connection, and nothing new starts.
    """

    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenTable | None,
        tracing: Tracing | None = None,
        *,
        stopping: Callable[[], bool] = lambda: False,
        probes: tuple[str, ...] = (),
    ) -> None:
        self._app = app
        self._tokens = tokens
        self._tracing = tracing
        self._stopping = stopping
        self._probes = probes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            await self._app(scope, receive, send)
            return
        if self._tracing is not None and not _probe(scope):
            await self._traced(self._tracing, scope, receive, send)
            return
        await self._guarded(scope, receive, send)

    async def _traced(self, tracing: Tracing, scope: Scope, receive: Receive, send: Send) -> None:
        """The request inside a SERVER span (OpenTelemetry's HTTP conventions), continuing the
        caller's trace when its headers carry a W3C ``traceparent``."""
        headers = ((k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"])
        span, token = tracing.start_server_span(
            f"{scope['method']} {scope['path']}",
            carrier_of(headers),
            {"http.request.method": scope["method"], "url.path": scope["path"]},
        )
        status = 0

        async def tracked_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._guarded(scope, receive, tracked_send)
        finally:
            status = status or 499  # no answer: the client went away
            span.set_attribute("http.response.status_code", status)
            error = None if status < 400 else f"{code_of(status)}: HTTP {status}"
            tracing.end_server_span(span, token, error)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        bind_call(f"{scope['method']} {scope['path']}", _peer(scope))
        answered: MutableMapping[str, Any] = {"status": 0}

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered["status"] = message["status"]
            await send(message)

        try:
            refusal = self._admit(scope)
            if refusal is not None:
                await send_error(tracked_send, refusal)
            else:
                await self._app(scope, receive, tracked_send)
        except EtherError as error:
            if answered["status"]:
                raise
            await send_error(tracked_send, error)
        except Exception as error:
            correlation_id = uuid.uuid4().hex[:12]
            log.error("request crashed", correlation_id=correlation_id, exc_info=error)
            if not answered["status"]:
                await send_error(
                    tracked_send,
                    _Internal(
                        "internal error; the host log has the details under correlation id "
                        f"{correlation_id}",
                        reason=Reason.INTERNAL,
                        metadata={"correlation_id": correlation_id},
                    ),
                )
        finally:
            status = int(answered["status"]) or 499  # no answer: the client went away
            fields = {
                "code": code_of(status),
                "http_status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            }
            log_later(log.info, "rpc", fields)

    def _admit(self, scope: Scope) -> EtherError | None:
        """Set the caller on the scope; the error to answer when it is refused."""
        if self._stopping() and scope["path"] not in self._probes:
            return Unavailable(
                "the host is stopping: it takes no new requests; retry on another host or once "
                "it has restarted",
                reason=Reason.HOST_STOPPING,
                retry_after=1.0,
            )
        entry = rights.route_entry(scope["path"])
        right = rights.HTTP_RIGHTS[entry] if entry is not None else rights.AUTHENTICATED
        if right == rights.OPEN:
            return None
        if self._tokens is None:
            scope[IDENTITY_KEY] = LOCAL
            return None
        values = [
            value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization"
        ]
        identity = bearer_identity(self._tokens, values, "header")
        if isinstance(identity, str):
            return Unauthenticated(identity, reason=Reason.INVALID_CREDENTIALS)
        scope[IDENTITY_KEY] = identity
        if right == rights.AUTHENTICATED:
            return None
        try:
            if entry in rights.SCOPED_ROUTES:
                rights.require_some(identity, right)
            else:
                rights.require(identity, right)
        except EtherError as error:
            return error
        return None


def _probe(scope: Scope) -> bool:
    """Whether the request is a liveness or readiness probe (an OPEN route): not traced, as
    gRPC health checks are not."""
    entry = rights.route_entry(scope["path"])
    return entry is not None and rights.HTTP_RIGHTS[entry] == rights.OPEN


def _peer(scope: Scope) -> str:
    """The client's address as grpc writes a peer: ``ipv4:127.0.0.1:5000``, ``ipv6:[::1]:5000``."""
    client = scope.get("client")
    if not client:
        return "unknown"
    host, port = client
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"


class _Internal(EtherError):
    """An uncaught exception, answered 500 with a correlation id, never its text."""
